/* hkern's port to PicoRV32: interrupts as a bit mask in q1 at entry, masked by maskirq (a set bit
 * masks), ECALL/EBREAK as interrupt 1, LiteX's peripherals from interrupt 3 on. */
#include "port.h"

#define IRQ_SYSCALL  (1u << 1)     /* ECALL / EBREAK / illegal instruction */
#define IRQ_CPU      0x7u          /* the core's own: timer, syscall, bus error */
#define ECALL        0x00000073u

static uint32_t enabled = IRQ_SYSCALL;   /* unmasked while interrupts are on */

/* maskirq x0, rs: the new mask (R-type, custom-0, funct3 6, funct7 3). */
static inline void maskirq(uint32_t mask)
{
    asm volatile(".insn r 0x0b, 6, 3, x0, %0, x0" : : "r"(mask) : "memory");
}

int port_cause_is_syscall(uint32_t cause) { return (cause & IRQ_SYSCALL) != 0; }

uint32_t port_pending_irqs(uint32_t cause) { return cause & ~IRQ_CPU & enabled; }

/* The return address of an ECALL is the ECALL itself: step over it. */
void port_syscall_return(uint32_t *frame)
{
    if (*(const uint32_t *)frame[K_PC] == ECALL)
        frame[K_PC] += 4;
}

uint32_t port_task_status(void) { return 0; }

void port_unmask_irq(int irq)
{
    enabled |= 1u << irq;
}

/* A task's masked section: the kernel's calls (ECALL) stay open, as on the other CPUs. */
void port_irq_off(void) { maskirq(~IRQ_SYSCALL); }
void port_irq_on(void) { maskirq(~enabled); }
