/* The DUT firmware: a test subject the rig measures from outside (docs/dut-cpus-design.md).
 *
 * Instrumented as users instrument theirs: the stimulus interrupt's handler writes the ISR pin as its
 * first statement and drops it as its last; the main loop, woken by the handler, pulses the task pin.
 * For the cross-check the firmware also measures with its own clock (the timer's uptime counter, in
 * DUT cycles) the ISR's duration and the ISR-entry -> task time of every stimulus, and writes them to
 * the console: "irq N isr_cycles A task_cycles B".
 */
#include <stdint.h>

#include <generated/csr.h>
#include <generated/soc.h>
#include <irq.h>

#define ISR_PIN  (1u << 0)
#define TASK_PIN (1u << 1)

static void put_char(char c) { console_out_write(c); }

static void put_text(const char *s)
{
    while (*s)
        put_char(*s++);
}

static void put_decimal(uint32_t v)
{
    char digits[11];
    int i = sizeof(digits) - 1;
    digits[i] = 0;
    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put_text(digits + i);
}

static inline uint32_t cycles(void)
{
    timer0_uptime_latch_write(1);
    return (uint32_t)timer0_uptime_cycles_read();
}

static volatile uint32_t irqs, isr_entry, isr_exit;

/* The handler's work: between the two pin writes, exactly what the rig's ISR duration spans. */
static __attribute__((noinline)) void on_stimulus(void)
{
    gpio_out_write(ISR_PIN);
    uint32_t entry = cycles();
    stim_ev_pending_write(1);
    irqs++;
    isr_entry = entry;
    isr_exit = cycles();
    gpio_out_write(0);
}

static volatile uint32_t warmed;

void isr(void)
{
    /* The peripheral's own pending bit: a CPU that latches its interrupt line would see it again. */
    if (stim_ev_pending_read() & 1)
        on_stimulus();
    if (timer0_ev_pending_read() & 1) {   /* the warm-up interrupt (main) */
        timer0_ev_pending_write(1);
        timer0_ev_enable_write(0);
        on_stimulus();
        warmed = 1;
    }
}

/* The woken task: its pin pulse, then the sample's line on the console. */
static __attribute__((noinline)) void on_wake(uint32_t sample)
{
    gpio_out_write(TASK_PIN);
    uint32_t task = cycles();
    gpio_out_write(0);
    put_text("irq ");
    put_decimal(sample);
    put_text(" isr_cycles ");
    put_decimal(isr_exit - isr_entry);
    put_text(" task_cycles ");
    put_decimal(task - isr_entry);
    put_char('\n');
}

int main(void)
{
    put_text("hilat DUT " CONFIG_CPU_HUMAN_NAME "\n");
    /* Run both measured paths once before any stimulus, the handler's from an interrupt as the
       stimulus's will (the timer's, once), so that the first sample's instructions, data and stack
       come from warm caches as every later one's do (these pins pulse before the rig captures). */
    timer0_en_write(0);
    timer0_reload_write(0);
    timer0_load_write(1000);
    timer0_en_write(1);
    timer0_ev_pending_write(1);
    timer0_ev_enable_write(1);
    irq_setmask(1 << TIMER0_INTERRUPT);
    irq_setie(1);
    while (!warmed)
        ;
    on_wake(0);
    irqs = 0;
    stim_mode_write(0);           /* an event on ... */
    stim_edge_write(0);           /* ... the rising edge */
    stim_ev_pending_write(1);
    stim_ev_enable_write(1);
    irq_setmask(1 << STIM_INTERRUPT);
    uint32_t seen = 0;
    for (;;) {
        if (irqs != seen) {
            seen = irqs;
            on_wake(seen);
        }
    }
}
