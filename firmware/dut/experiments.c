/* The DUT firmware's experiments (docs/dut-benchmarks.md): the seeds' tests, on hkern (kernel.h),
 * instrumented as users instrument theirs. One is built per ROM image (EXPERIMENT):
 *
 * EXPERIMENT_RESPONSE  SSC, Faller, Realfeel: the stimulus interrupt's handler raises the ISR pin as
 *     its first statement and posts a semaphore; the highest-priority task, waiting on it, raises
 *     the task pin at dispatch. BACKGROUND_MASK_CYCLES > 0 adds Faller's DMA: a background task that
 *     masks interrupts for that many cycles with the tag pin high, then leaves them open for
 *     BACKGROUND_OPEN_CYCLES.
 * EXPERIMENT_PIPELINE  REAL/STONE: the handler starts a pipeline of three tasks passing the sample on
 *     through queues, each working a pseudo-random number of cycles; the last raises the task pin.
 * EXPERIMENT_IPC       Sacha: no stimulus; a client task and a server task time send -> receive,
 *     signal -> handler, semaphore handoff and yield -> other task with a pin edge on each side.
 *
 * In the stimulus experiments the firmware also measures every sample with its own cycle counter
 * and prints "irq N isr_cycles A task_cycles B entry C" (hex: the handler's duration, handler entry
 * -> task pin, and the counter at handler entry) for the cross-check against the rig, after
 * "warm-up N" lines: timer interrupts that run the same path before any stimulus, so that the first
 * stimulus finds it warm as every later one does.
 */
#include <stdint.h>

#include "board.h"
#include "kernel.h"
#include "port.h"

#define EXPERIMENT_RESPONSE 1
#define EXPERIMENT_PIPELINE 2
#define EXPERIMENT_IPC      3

#ifndef EXPERIMENT
#define EXPERIMENT EXPERIMENT_RESPONSE
#endif
#ifndef BACKGROUND_MASK_CYCLES
#define BACKGROUND_MASK_CYCLES 0
#endif
#ifndef BACKGROUND_OPEN_CYCLES
#define BACKGROUND_OPEN_CYCLES 600
#endif
#ifndef IPC_GAP_CYCLES
#define IPC_GAP_CYCLES 400      /* between two rounds of the IPC tests: the rig's edges stay apart */
#endif

#define PRIORITY_RESPONDER 7
#define PRIORITY_STAGE1    6
#define PRIORITY_STAGE2    5
#define PRIORITY_STAGE3    4
#define PRIORITY_CONSOLE   2
#define PRIORITY_BACKGROUND 1

#define STACK_WORDS 256

/* ---- console ---------------------------------------------------------------------------------- */

void put_char(char c) { console_out_write((uint32_t)c); }

void put_text(const char *s)
{
    while (*s)
        put_char(*s++);
}

/* In hex, 0x...: no division, and only shifts by 4 (a CPU without a divider or a barrel shifter
   takes thousands of cycles for a decimal line). */
void put_hex(uint32_t v)
{
    static const char digits[] = "0123456789abcdef";
    char text[11];
    int i = sizeof(text) - 1;
    text[i] = 0;
    do {
        text[--i] = digits[v & 15];
        v >>= 4;
    } while (v);
    text[--i] = 'x';
    text[--i] = '0';
    put_text(text + i);
}

static __attribute__((unused)) void spin(uint32_t n)
{
    uint32_t start = cycles();
    while (cycles() - start < n)
        ;
}

#if EXPERIMENT != EXPERIMENT_IPC
/* ---- stimulus experiments: one record per sample ------------------------------------------------ */

#define RECORDS 16               /* samples in flight between the handler and the console */
/* Runs of the measured path before the first stimulus, from a timer interrupt, so that the first
   stimulus finds caches, stack and branch predictor as every later one does (one was not enough on
   VexRiscv: the second run was still 20 cycles slower than the third). */
#define WARM_UPS 2
#define WARM_UP_CYCLES 6000

struct record { uint32_t isr_entry, isr_exit, task; };
static struct record records[RECORDS];
static uint32_t sample;                  /* the handler's count: the warm-up 0, then the stimuli */
static uint32_t log_slots[RECORDS];
static k_queue_t log_queue = K_QUEUE_INIT(log_slots);
static k_sem_t wake = K_SEM_INIT(0);
static uint32_t console_stack[STACK_WORDS];

/* The handler of both the stimulus and the warm-up timer, the same instructions for each: its work
   from the first pin write to the last. The timer's interrupts are samples 0 .. WARM_UPS - 1. */
static void on_interrupt(void)
{
    /* A CPU that latches its interrupt lines (PicoRV32) enters again once for a line the last
       entry cleared: the peripherals' own pending bits say whether there is anything to serve. */
    if (!((stim_ev_pending_read() | timer0_ev_pending_read()) & 1))
        return;
    pin_set(PIN_ISR);
    uint32_t entry = cycles();
    stim_ev_pending_write(1);
    timer0_ev_pending_write(1);
    struct record *r = &records[sample++ % RECORDS];
    r->isr_entry = entry;
    k_isr_sem_post(&wake);
    r->isr_exit = cycles();
    pin_clear(PIN_ISR);
    if (sample == WARM_UPS)      /* (after the measured part) the last warm-up: no more timer */
        timer0_en_write(0);
}

/* The sample's task response: the task pin, the firmware's own reading beside it, the console. */
static void respond(uint32_t index)
{
    pin_set(PIN_TASK);
    uint32_t now = cycles();
    pin_clear(PIN_TASK);
    records[index % RECORDS].task = now;
    k_queue_send(&log_queue, index);
}

static void console_task(void *arg)
{
    (void)arg;
    for (;;) {
        uint32_t index = k_queue_receive(&log_queue);
        struct record *r = &records[index % RECORDS];
        if (index < WARM_UPS) {
            put_text("warm-up ");
            put_hex(index);
        } else {
            put_text("irq ");
            put_hex(index - WARM_UPS + 1);
        }
        put_text(" isr_cycles ");
        put_hex(r->isr_exit - r->isr_entry);
        put_text(" task_cycles ");
        put_hex(r->task - r->isr_entry);
        put_text(" entry ");
        put_hex(r->isr_entry);
        put_char('\n');
    }
}

static void start_stimulus_experiment(void)
{
    k_task_create("console", console_task, 0, PRIORITY_CONSOLE, console_stack, STACK_WORDS);
    /* The warm-up: one timer interrupt soon after the kernel starts. */
    timer0_en_write(0);
    timer0_reload_write(WARM_UP_CYCLES);
    timer0_load_write(WARM_UP_CYCLES);
    timer0_ev_pending_write(1);
    timer0_ev_enable_write(1);
    timer0_en_write(1);
    k_irq_attach(TIMER0_INTERRUPT, on_interrupt);
    stim_mode_write(0);           /* an event on ... */
    stim_edge_write(0);           /* ... the rising edge */
    stim_ev_pending_write(1);
    stim_ev_enable_write(1);
    k_irq_attach(STIM_INTERRUPT, on_interrupt);
}
#endif

#if EXPERIMENT == EXPERIMENT_RESPONSE
static uint32_t responder_stack[STACK_WORDS];

static void responder_task(void *arg)
{
    (void)arg;
    for (uint32_t served = 0;; served++) {
        k_sem_wait(&wake);       /* one post per sample, in order: the warm-ups, then the stimuli */
        respond(served);
    }
}

#if BACKGROUND_MASK_CYCLES > 0
static uint32_t background_stack[STACK_WORDS];

/* Faller's DMA: interrupts masked for a set time, the tag pin high meanwhile. */
static void background_task(void *arg)
{
    (void)arg;
    for (;;) {
        pin_set(PIN_TAG);
        port_irq_off();
        spin(BACKGROUND_MASK_CYCLES);
        port_irq_on();
        pin_clear(PIN_TAG);
        spin(BACKGROUND_OPEN_CYCLES);
    }
}
#endif

static void setup(void)
{
    k_task_create("responder", responder_task, 0, PRIORITY_RESPONDER, responder_stack, STACK_WORDS);
#if BACKGROUND_MASK_CYCLES > 0
    k_task_create("background", background_task, 0, PRIORITY_BACKGROUND, background_stack, STACK_WORDS);
#endif
    start_stimulus_experiment();
}
#endif

#if EXPERIMENT == EXPERIMENT_PIPELINE
/* Three stages; each works 100..355 cycles, plus up to 1,000 more one time in eight: a sample
   that lands on several long stages misses a tight deadline. */
static uint32_t stage_stacks[3][STACK_WORDS];
static uint32_t q12_slots[4], q23_slots[4];
static k_queue_t q12 = K_QUEUE_INIT(q12_slots), q23 = K_QUEUE_INIT(q23_slots);
static uint32_t lcg_state = 12345;

static uint32_t work_cycles(void)
{
    lcg_state = lcg_state * 1664525u + 1013904223u;
    uint32_t r = lcg_state >> 16;
    return 100 + (r & 0xff) + ((r & 0x700) == 0 ? ((r >> 11) & 0x1f) * 32 : 0);
}

static void stage1(void *arg)
{
    (void)arg;
    for (uint32_t served = 0;; served++) {
        k_sem_wait(&wake);
        spin(work_cycles());
        k_queue_send(&q12, served);
    }
}

/* The stages after the first: each takes a sample from its queue, works, and hands it on to the
   next queue, or (the last, without one) to the pins. */
struct later_stage {
    k_queue_t *in, *out;
};
static struct later_stage stage2 = {&q12, &q23}, stage3 = {&q23, 0};

static void later_stage(void *arg)
{
    struct later_stage *stage = arg;
    for (;;) {
        uint32_t index = k_queue_receive(stage->in);
        spin(work_cycles());
        if (stage->out)
            k_queue_send(stage->out, index);
        else
            respond(index);
    }
}

static void setup(void)
{
    k_task_create("stage1", stage1, 0, PRIORITY_STAGE1, stage_stacks[0], STACK_WORDS);
    k_task_create("stage2", later_stage, &stage2, PRIORITY_STAGE2, stage_stacks[1], STACK_WORDS);
    k_task_create("stage3", later_stage, &stage3, PRIORITY_STAGE3, stage_stacks[2], STACK_WORDS);
    start_stimulus_experiment();
}
#endif

#if EXPERIMENT == EXPERIMENT_IPC
/* Sacha's operations, each timed by the rig between two pin edges no other test uses:
     send -> receive          spare rise -> task rise
     signal -> handler        spare fall -> task fall
     semaphore handoff        tag rise   -> ISR rise
     yield -> other task      tag fall   -> ISR fall
   The server has the higher priority, so each operation switches to it at once; the client and
   the yield partner share a priority, and the partner runs only when the client yields. */
static uint32_t server_stack[STACK_WORDS], client_stack[STACK_WORDS], partner_stack[STACK_WORDS];
static uint32_t message_slots[4];
static k_queue_t messages = K_QUEUE_INIT(message_slots);
static k_sem_t handoff = K_SEM_INIT(0);
static k_task_t *server;

static void on_signal(uint32_t signals)
{
    (void)signals;
    pin_clear(PIN_TASK);
}

static void server_task(void *arg)
{
    (void)arg;
    k_signal_handler(on_signal);
    for (;;) {
        k_queue_receive(&messages);
        pin_set(PIN_TASK);
        k_pause();
        k_sem_wait(&handoff);
        pin_set(PIN_ISR);
    }
}

static void client_task(void *arg)
{
    (void)arg;
    for (uint32_t round = 1;; round++) {
        pin_set(PIN_SPARE);
        k_queue_send(&messages, round);
        pin_clear(PIN_SPARE);
        k_signal(server, 1);
        pin_set(PIN_TAG);
        k_sem_post(&handoff);
        pin_clear(PIN_TAG);
        k_yield();
        spin(IPC_GAP_CYCLES);
    }
}

static void partner_task(void *arg)
{
    (void)arg;
    for (;;) {
        pin_clear(PIN_ISR);
        k_yield();
    }
}

static void setup(void)
{
    /* Created in this order: when the server blocks, the client (next in order) runs, not its
       partner. */
    server = k_task_create("server", server_task, 0, 5, server_stack, STACK_WORDS);
    k_task_create("client", client_task, 0, 3, client_stack, STACK_WORDS);
    k_task_create("partner", partner_task, 0, 3, partner_stack, STACK_WORDS);
}
#endif

static const char *const experiment_names[] = {"", "response", "pipeline", "ipc"};

int main(void)
{
    put_text("hilat DUT " CONFIG_CPU_HUMAN_NAME " hkern ");
    put_text(experiment_names[EXPERIMENT]);
    put_char('\n');
    setup();
    k_start();
}
