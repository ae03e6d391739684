/* hkern's start-up and trap path for PicoRV32. Its interrupts enter at reset + 0x10 with the return
 * address in q0 and the pending interrupts in q1 (ECALL is interrupt 1); they stay masked until
 * retirq. The frame goes onto the interrupted task's stack, port.h's layout (word 0 the return
 * address, word i register xi). PicoRV32's custom instructions, from its documentation:
 * getq rd, qs / setq qd, rs / retirq / maskirq rd, rs (R-type, opcode custom-0). */
#include "trap_frame.inc"
#define Q0 0
#define Q1 1
#define Q2 2
#define R_TYPE(f7, rs2, rs1, f3, rd) .word (((f7) << 25) | ((rs2) << 20) | ((rs1) << 15) | ((f3) << 12) | ((rd) << 7) | 0x0b)
#define GETQ(rd, qs)   R_TYPE(0, 0, qs, 4, rd)
#define SETQ(qd, rs)   R_TYPE(1, 0, rs, 2, qd)
#define RETIRQ         R_TYPE(2, 0, 0, 0, 0)

    .section .text
    .global _start
_start:
    j       reset

    .org    0x10
    .global trap_entry
trap_entry:
    SETQ(Q2, 1)                 /* q2 = ra: x1 becomes a scratch register */
    addi    sp, sp, -FRAME_BYTES
    save_x3_x31
    GETQ(1, Q2)
    sw      x1,   1*4(sp)
    GETQ(1, Q0)
    sw      x1,   0*4(sp)
    addi    x1, sp, FRAME_BYTES
    sw      x1,   2*4(sp)
    mv      a0, sp
    GETQ(11, Q1)                /* a1: the pending interrupts */
    call    k_trap
    /* fall through: resume the frame k_trap chose */


resume:
    mv      sp, a0
    lw      x1,   0*4(sp)
    SETQ(Q0, 1)
    lw      x1,   1*4(sp)
    restore_x3_x31
    addi    sp, sp, FRAME_BYTES
    RETIRQ

reset:
    la      sp, _fstack
    init_memory
    call    main
5:  j       5b
