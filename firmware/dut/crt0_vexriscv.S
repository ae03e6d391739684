/* hkern's start-up and trap path for VexRiscv (machine mode only; no mscratch on the smaller
 * variants, so the frame goes straight onto the interrupted task's stack). The frame layout is
 * port.h's: word 0 mepc, word i register xi, word 32 mstatus. */
#include "trap_frame.inc"

    .section .text
    .global _start
_start:
    j       reset

    .align  2
    .global trap_entry
trap_entry:
    addi    sp, sp, -FRAME_BYTES
    sw      x1,   1*4(sp)
    save_x3_x31
    csrr    t0, mepc
    sw      t0,   0*4(sp)
    csrr    t0, mstatus
    sw      t0,  32*4(sp)
    addi    t0, sp, FRAME_BYTES
    sw      t0,   2*4(sp)
    mv      a0, sp
    csrr    a1, mcause
    call    k_trap
    /* fall through: resume the frame k_trap chose */


resume:
    mv      sp, a0
    lw      t0,   0*4(sp)
    csrw    mepc, t0
    lw      t0,  32*4(sp)
    csrw    mstatus, t0
    lw      x1,   1*4(sp)
    restore_x3_x31
    addi    sp, sp, FRAME_BYTES
    mret

reset:
    la      sp, _fstack
    la      t0, trap_entry
    csrw    mtvec, t0
    init_memory
    li      t0, 0x800           /* mie.MEIE: the LiteX interrupt controller's line */
    csrw    mie, t0
    call    main
5:  j       5b
