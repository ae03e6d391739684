/* hilat_veril.cpp: the Verilator side of LiteX's simulator harness (what LiteX's core/veril.cpp
 * provides to sim.c and sim_init.cpp), built in its place by targets/sim.py. The difference: tracing
 * only in a build with Verilator's --trace (VM_TRACE). LiteX's harness opens sim.vcd and flushes the
 * tracer after every time step even when nothing is dumped; without it the simulator runs faster.
 * A traced build (targets.sim.build(trace=True)) dumps every signal to sim.vcd, as LiteX's does.
 */
#include <stdint.h>
#include <stdio.h>
#include "Vsim.h"
#include "verilated.h"
#if VM_TRACE
#include "verilated_vcd_c.h"
static VerilatedVcdC *tfp;
static uint64_t tfp_start;
static uint64_t tfp_end;
static Vsim *g_sim = nullptr;
#endif

static uint64_t main_time = 0;

extern "C" void litex_sim_eval(void *vsim, uint64_t time_ps)
{
  Vsim *sim = (Vsim *)vsim;
  sim->eval();
  main_time = time_ps;
}

extern "C" void litex_sim_init_cmdargs(int argc, char *argv[])
{
  Verilated::commandArgs(argc, argv);
}

extern "C" void litex_sim_init_tracer(void *vsim, long start, long end)
{
#if VM_TRACE
  Vsim *sim = (Vsim *)vsim;
  tfp_start = start;
  tfp_end = end >= 0 ? end : UINT64_MAX;
  Verilated::traceEverOn(true);
  tfp = new VerilatedVcdC;
  sim->trace(tfp, 99);
  tfp->open("sim.vcd");
  tfp->set_time_unit("1ps");
  tfp->set_time_resolution("1ps");
  g_sim = sim;
#else
  (void)vsim;
  (void)start;
  (void)end;
#endif
}

extern "C" void litex_sim_tracer_dump()
{
#if VM_TRACE
  if (g_sim->sim_trace && tfp_start <= main_time && main_time <= tfp_end)
    tfp->dump((vluint64_t)main_time);
#endif
}

extern "C" int litex_sim_got_finish()
{
  int finished = Verilated::gotFinish();
#if VM_TRACE
  tfp->flush();
  if (finished)
    tfp->close();
#endif
  return finished;
}

#if VM_COVERAGE
extern "C" void litex_sim_coverage_dump()
{
  VerilatedCov::write("sim.cov");
}
#endif

double sc_time_stamp()
{
  return main_time;
}
