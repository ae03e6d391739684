/* hkern's CPU port: what kernel.c needs from each CPU family (port_<cpu>.c, crt0_<cpu>.S).
 *
 * The trap path (crt0_<cpu>.S) saves every register of the interrupted task in a frame on that
 * task's stack, calls k_trap(frame, cause) and resumes whichever frame k_trap returns: that is the
 * context switch. The frame's layout is the same on every CPU.
 */
#ifndef HKERN_PORT_H
#define HKERN_PORT_H

#include <stdint.h>

#define K_FRAME_WORDS 36        /* pc, x1..x31, status; padded to 16 bytes (the ABI's stack alignment) */
#define K_PC      0             /* where the task resumes */
#define K_RA      1
#define K_SP      2             /* its stack pointer above the frame (informative: restore pops the frame) */
#define K_A0      10
#define K_A1      11
#define K_A2      12
#define K_A7      17
#define K_STATUS  32            /* VexRiscv: mstatus; PicoRV32: unused */

uint32_t *k_trap(uint32_t *frame, uint32_t cause);          /* kernel.c, called by the trap path */

int      port_cause_is_syscall(uint32_t cause);
uint32_t port_pending_irqs(uint32_t cause);                  /* the enabled interrupts to serve */
void     port_syscall_return(uint32_t *frame);               /* past the trapping instruction */
uint32_t port_task_status(void);                             /* K_STATUS of a new task's first frame */
void     port_unmask_irq(int irq);
void     port_irq_off(void);                                 /* a masked section in a task */
void     port_irq_on(void);

/* A kernel call from a task: number in a7, arguments in a0..a2, result in a0. */
static inline uint32_t port_syscall(uint32_t number, uint32_t arg0, uint32_t arg1)
{
    register uint32_t a0 asm("a0") = arg0;
    register uint32_t a1 asm("a1") = arg1;
    register uint32_t a7 asm("a7") = number;
    asm volatile("ecall" : "+r"(a0) : "r"(a1), "r"(a7) : "memory");
    return a0;
}

#endif
