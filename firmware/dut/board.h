/* The DUT board as the firmware sees it: the pins the rig watches, the cycle counter, the console. */
#ifndef HKERN_BOARD_H
#define HKERN_BOARD_H

#include <stdint.h>

#include <generated/csr.h>
#include <generated/soc.h>

#define PIN_ISR   (1u << 0)
#define PIN_TASK  (1u << 1)
#define PIN_TAG   (1u << 2)
#define PIN_SPARE (1u << 3)

/* Each write changes only the pins it names, in one bus write: no read-modify-write that a
   preempting task or handler could interleave with. */
static inline void pin_set(uint32_t pins) { pins_set_write(pins); }
static inline void pin_clear(uint32_t pins) { pins_clear_write(pins); }

/* DUT clock cycles since reset (the timer's uptime counter: latched by the write, so the moment
   read is the write's, whatever the read costs). */
static inline uint32_t cycles(void)
{
    timer0_uptime_latch_write(1);
    return (uint32_t)timer0_uptime_cycles_read();
}

void put_char(char c);
void put_text(const char *s);
void put_hex(uint32_t v);

#endif
