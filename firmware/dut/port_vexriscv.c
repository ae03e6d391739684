/* hkern's port to VexRiscv: machine-mode traps, LiteX's interrupt controller in CSRs 0xBC0
 * (mask) and 0xFC0 (pending) (irq.h). */
#include <irq.h>

#include "port.h"

#define MCAUSE_INTERRUPT    0x80000000u
#define MCAUSE_ECALL_M      11u
#define MSTATUS_MPIE        0x80u
#define MSTATUS_MPP_MACHINE 0x1800u

int port_cause_is_syscall(uint32_t cause) { return cause == MCAUSE_ECALL_M; }

uint32_t port_pending_irqs(uint32_t cause)
{
    return (cause & MCAUSE_INTERRUPT) ? irq_pending() & irq_getmask() : 0;
}

void port_syscall_return(uint32_t *frame) { frame[K_PC] += 4; }

/* mret sets MIE from MPIE: a task starts with interrupts on, in machine mode. */
uint32_t port_task_status(void) { return MSTATUS_MPIE | MSTATUS_MPP_MACHINE; }

void port_unmask_irq(int irq) { irq_setmask(irq_getmask() | (1u << irq)); }

void port_irq_off(void) { irq_setie(0); }
void port_irq_on(void) { irq_setie(1); }
