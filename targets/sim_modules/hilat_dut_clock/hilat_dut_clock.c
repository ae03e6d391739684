/* hilat_dut_clock: a clock of any mean frequency on the simulator's existing time step.
 *
 * LiteX's clocker makes the simulator's step the gcd of every clock's half period, so a frequency
 * unrelated to the rig's (33,333,700 Hz) would make it about a picosecond. This module leaves the
 * step alone: a phase accumulator counts the half periods elapsed at each step's time t,
 * floor(t * 2 f / 1e12), and the clock is high while that count is even (high from t = 0, like
 * LiteX's clocker). Each edge falls on the first step at or after its exact time, so the mean
 * frequency is exact and the edges jitter by less than a step. targets/sim.py's dut_clock_edges()
 * computes the same schedule.
 *
 * Args (sim_config.js): {"freq_hz": f}, f > 0 whole Hz. A half period shorter than a step would
 * skip edges: targets/sim.py refuses such a frequency; here it is reported once on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>
#include "error.h"
#include "modules.h"

#define PS_PER_S 1000000000000ull

struct session_s {
  char *clk;
  uint64_t freq_hz;
  uint64_t last_ps;    /* the time of the previous step */
  uint64_t acc;        /* (t * 2 f) mod 1e12 */
  uint64_t halves;     /* floor(t * 2 f / 1e12): half periods elapsed */
  int warned;
};

static int dut_clock_start(void *base)
{
  (void)base;
  printf("[hilat_dut_clock] loaded\n");
  return RC_OK;
}

static int dut_clock_new(void **sess, char *args)
{
  struct session_s *s;
  json_object *args_json, *freq_json;
  int64_t freq;

  if (!sess)
    return RC_INVARG;
  *sess = NULL;
  args_json = json_tokener_parse(args);
  if (!args_json || !json_object_object_get_ex(args_json, "freq_hz", &freq_json)) {
    fprintf(stderr, "[hilat_dut_clock] args need \"freq_hz\": %s\n", args ? args : "(none)");
    if (args_json)
      json_object_put(args_json);
    return RC_JSERROR;
  }
  freq = json_object_get_int64(freq_json);
  json_object_put(args_json);
  /* Up to 1 GHz keeps step * 2 f (steps of up to 9 ms) clear of 64 bits. */
  if (freq <= 0 || freq > 1000000000) {
    fprintf(stderr, "[hilat_dut_clock] \"freq_hz\" must be 1 .. 1e9, not %lld\n", (long long)freq);
    return RC_JSERROR;
  }
  s = (struct session_s *)calloc(1, sizeof(*s));
  if (!s)
    return RC_NOENMEM;
  s->freq_hz = (uint64_t)freq;
  *sess = s;
  return RC_OK;
}

static int dut_clock_add_pads(void *sess, struct pad_list_s *plist)
{
  struct session_s *s = (struct session_s *)sess;
  int i;

  if (!s || !plist)
    return RC_INVARG;
  for (i = 0; plist->pads[i].name; i++)
    if (!strcmp(plist->pads[i].name, plist->name))
      s->clk = (char *)plist->pads[i].signal;
  if (!s->clk) {
    fprintf(stderr, "[hilat_dut_clock] no pad %s\n", plist->name);
    return RC_ERROR;
  }
  *s->clk = 0;
  printf("[hilat_dut_clock] %s: freq_hz=%llu\n", plist->name, (unsigned long long)s->freq_hz);
  return RC_OK;
}

static int dut_clock_tick(void *sess, uint64_t time_ps)
{
  struct session_s *s = (struct session_s *)sess;
  uint64_t delta = time_ps - s->last_ps;
  int toggles = 0;

  s->last_ps = time_ps;
  s->acc += delta * 2 * s->freq_hz;
  while (s->acc >= PS_PER_S) {
    s->acc -= PS_PER_S;
    s->halves++;
    toggles++;
  }
  if (toggles > 1 && !s->warned) {
    fprintf(stderr, "[hilat_dut_clock] %llu Hz: half period shorter than the simulator's step (%llu ps), "
            "edges are lost\n", (unsigned long long)s->freq_hz, (unsigned long long)delta);
    s->warned = 1;
  }
  *s->clk = !(s->halves & 1);
  return RC_OK;
}

static struct ext_module_s ext_mod = {
  "hilat_dut_clock",
  dut_clock_start,
  dut_clock_new,
  dut_clock_add_pads,
  NULL,
  dut_clock_tick
};

int litex_sim_ext_module_init(int (*register_module)(struct ext_module_s *))
{
  return register_module(&ext_mod);
}
