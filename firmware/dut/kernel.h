/* hkern: the DUT firmware's small preemptive priority kernel. A test subject for the rig
 * (docs/dut-benchmarks.md), not a product: tasks with their own stacks, strict priorities (round
 * robin among equals on yield), context switch on interrupt return, counting semaphores, message
 * queues of words, signals delivered to a handler in the receiving task, yield.
 *
 * Every kernel operation a task calls traps into the kernel (ecall), so the kernel's data is only
 * ever touched with interrupts masked, from the trap path; interrupt handlers call the same
 * operations directly (they run in that path already). A handler or an operation that readies a
 * task of higher priority than the running one switches to it when the trap returns.
 */
#ifndef HKERN_KERNEL_H
#define HKERN_KERNEL_H

#include <stdint.h>

#define K_MAX_TASKS  8
#define K_MAX_IRQS   32

typedef void (*k_entry_t)(void *arg);
typedef void (*k_signal_handler_t)(uint32_t signals);
typedef void (*k_irq_handler_t)(void);

typedef struct k_task k_task_t;

typedef struct {
    int32_t count;
    uint32_t waiters;              /* bit per task id */
} k_sem_t;

typedef struct {
    uint32_t *slots;
    uint16_t capacity, head, used;
    uint32_t receivers, senders;   /* bit per task id, blocked on this queue */
} k_queue_t;

#define K_SEM_INIT(n)             { (n), 0 }
#define K_QUEUE_INIT(buffer)      { (buffer), sizeof(buffer) / sizeof((buffer)[0]), 0, 0, 0, 0 }

/* Set-up, before k_start (interrupts off). Priorities: higher runs first; 0 is the idle task's. */
k_task_t *k_task_create(const char *name, k_entry_t entry, void *arg, int priority, uint32_t *stack,
                        uint32_t stack_words);
void k_irq_attach(int irq, k_irq_handler_t handler);   /* and unmasks it at the interrupt controller */
void k_start(void) __attribute__((noreturn));

/* From tasks (each a trap into the kernel). */
void     k_yield(void);
void     k_sem_wait(k_sem_t *sem);
void     k_sem_post(k_sem_t *sem);
void     k_queue_send(k_queue_t *queue, uint32_t message);      /* blocks while the queue is full */
uint32_t k_queue_receive(k_queue_t *queue);                     /* blocks while it is empty */
void     k_signal(k_task_t *task, uint32_t signals);            /* handler runs in that task */
void     k_signal_handler(k_signal_handler_t handler);          /* the calling task's */
void     k_pause(void);                                         /* until a signal was handled */
k_task_t *k_self(void);

/* From interrupt handlers (already in the kernel's trap path). */
void k_isr_sem_post(k_sem_t *sem);
int  k_isr_queue_send(k_queue_t *queue, uint32_t message);      /* 0: the queue was full */

/* The interrupt handlers' and the kernel's shared counters, for the console. */
extern volatile uint32_t k_switches;

#endif
