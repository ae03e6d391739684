/* hkern (kernel.h): tasks, scheduling, semaphores, queues, signals. Runs only in the trap path,
 * with interrupts masked; the CPU-specific part is port_<cpu>.c and crt0_<cpu>.S. */
#include <stddef.h>

#include "kernel.h"
#include "port.h"

enum { SYS_YIELD, SYS_SEM_WAIT, SYS_SEM_POST, SYS_QUEUE_SEND, SYS_QUEUE_RECEIVE, SYS_SIGNAL, SYS_SIGNAL_HANDLER,
       SYS_PAUSE, SYS_SIGNAL_RETURN, SYS_EXIT };

enum state { READY, BLOCKED, PAUSED, DEAD };

struct k_task {
    uint32_t *frame;               /* its saved registers, on its own stack, while it is not running */
    const char *name;
    uint8_t id, priority, state;
    uint8_t in_handler;            /* running its signal handler (handlers do not nest) */
    uint32_t signals;              /* pending */
    k_signal_handler_t handler;
    uint32_t *interrupted;         /* the frame a signal handler interrupted */
    uint32_t message;              /* a sender's message while it waits for room */
};

static struct k_task tasks[K_MAX_TASKS];
/* The start-up code as a task that has ended: its first trap switches to the tasks for good. */
static struct k_task boot = {.name = "boot", .state = DEAD};
static int task_count;
static struct k_task *current;
static k_irq_handler_t irq_handlers[K_MAX_IRQS];
volatile uint32_t k_switches;

static uint32_t idle_stack[64];

static void task_exit(void)
{
    port_syscall(SYS_EXIT, 0, 0);
    for (;;)
        ;
}

k_task_t *k_task_create(const char *name, k_entry_t entry, void *arg, int priority, uint32_t *stack,
                        uint32_t stack_words)
{
    if (task_count == K_MAX_TASKS)
        return NULL;
    struct k_task *t = &tasks[task_count];
    uint32_t *top = (uint32_t *)((uintptr_t)(stack + stack_words) & ~(uintptr_t)15);
    uint32_t *frame = top - K_FRAME_WORDS;
    for (int i = 0; i < K_FRAME_WORDS; i++)
        frame[i] = 0;
    frame[K_PC] = (uint32_t)entry;
    frame[K_RA] = (uint32_t)task_exit;
    frame[K_SP] = (uint32_t)top;
    frame[K_A0] = (uint32_t)arg;
    frame[K_STATUS] = port_task_status();
    t->frame = frame;
    t->name = name;
    t->id = (uint8_t)task_count++;
    t->priority = (uint8_t)priority;
    t->state = READY;
    return t;
}

void k_irq_attach(int irq, k_irq_handler_t handler)
{
    irq_handlers[irq] = handler;
    port_unmask_irq(irq);
}

static void idle(void *arg)
{
    (void)arg;
    for (;;)
        ;
}

void k_start(void)
{
    k_task_create("idle", idle, NULL, 0, idle_stack, sizeof(idle_stack) / sizeof(idle_stack[0]));
    current = &boot;
    port_irq_on();
    k_yield();
    for (;;)
        ;
}

/* The highest-priority task of a set (bit per id); the first created among equals. */
static struct k_task *highest(uint32_t set)
{
    struct k_task *best = NULL;
    for (int i = 0; i < task_count; i++)
        if ((set & (1u << i)) && (!best || tasks[i].priority > best->priority))
            best = &tasks[i];
    return best;
}

static void block(uint32_t *waiters)
{
    current->state = BLOCKED;
    *waiters |= 1u << current->id;
}

static struct k_task *wake(uint32_t *waiters)
{
    struct k_task *t = highest(*waiters);
    if (t) {
        *waiters &= ~(1u << t->id);
        t->state = READY;
    }
    return t;
}

static void sem_post(k_sem_t *sem)
{
    if (!wake(&sem->waiters))
        sem->count++;
}

static void append(k_queue_t *q, uint32_t message)
{
    uint32_t tail = q->head + q->used++;
    q->slots[tail >= q->capacity ? tail - q->capacity : tail] = message;
}

static int queue_put(k_queue_t *q, uint32_t message)
{
    struct k_task *receiver = wake(&q->receivers);
    if (receiver) {                /* straight into the waiting receiver's k_queue_receive result */
        receiver->frame[K_A0] = message;
        return 1;
    }
    if (q->used == q->capacity)
        return 0;
    append(q, message);
    return 1;
}

static int queue_take(k_queue_t *q, uint32_t *message)
{
    if (!q->used)
        return 0;
    *message = q->slots[q->head];
    if (++q->head == q->capacity)
        q->head = 0;
    q->used--;
    struct k_task *sender = wake(&q->senders);   /* room for a blocked sender's message */
    if (sender)
        append(q, sender->message);
    return 1;
}

static void signal(struct k_task *t, uint32_t signals)
{
    t->signals |= signals;
    if (t->state == PAUSED)
        t->state = READY;
}

void k_isr_sem_post(k_sem_t *sem) { sem_post(sem); }
int k_isr_queue_send(k_queue_t *queue, uint32_t message) { return queue_put(queue, message); }

static void syscall(uint32_t *frame)
{
    uint32_t arg0 = frame[K_A0], arg1 = frame[K_A1];
    switch (frame[K_A7]) {
    case SYS_YIELD:
        break;
    case SYS_SEM_WAIT: {
        k_sem_t *sem = (k_sem_t *)arg0;
        if (sem->count > 0)
            sem->count--;
        else
            block(&sem->waiters);
        break;
    }
    case SYS_SEM_POST:
        sem_post((k_sem_t *)arg0);
        break;
    case SYS_QUEUE_SEND: {
        k_queue_t *q = (k_queue_t *)arg0;
        if (!queue_put(q, arg1)) {
            current->message = arg1;
            block(&q->senders);
        }
        break;
    }
    case SYS_QUEUE_RECEIVE: {
        k_queue_t *q = (k_queue_t *)arg0;
        if (!queue_take(q, &frame[K_A0]))
            block(&q->receivers);   /* a sender writes the message into this frame's a0 */
        break;
    }
    case SYS_SIGNAL:
        signal((struct k_task *)arg0, arg1);
        break;
    case SYS_SIGNAL_HANDLER:
        current->handler = (k_signal_handler_t)arg0;
        break;
    case SYS_PAUSE:
        if (!current->signals)
            current->state = PAUSED;
        break;
    case SYS_SIGNAL_RETURN:          /* back into the frame the handler interrupted */
        current->frame = current->interrupted;
        current->in_handler = 0;
        break;
    case SYS_EXIT:
        current->state = DEAD;
        break;
    }
}

/* The next task: the highest priority ready one. The running task keeps the CPU against equals,
   unless it yields: then the next ready equal after it (in creation order) runs. */
static struct k_task *choose(int yielding)
{
    struct k_task *best = (!yielding && current->state == READY) ? current : NULL;
    /* (the start-up code's task is none of tasks[]: from it, the scan starts at the first) */
    struct k_task *t = current == &boot ? tasks + task_count - 1 : current;
    for (int k = 0; k < task_count; k++) {   /* the others from the one after current, then current */
        if (++t >= tasks + task_count)
            t = tasks;                       /* (no modulo: a division costs tens of cycles here) */
        if (t->state == READY && (!best || t->priority > best->priority))
            best = t;
    }
    return best;
}

static void signal_trampoline(uint32_t signals, k_signal_handler_t handler)
{
    handler(signals);
    port_syscall(SYS_SIGNAL_RETURN, 0, 0);
}

/* A task about to run with signals pending and a handler: run the handler first, on a frame below
   the task's own, which SYS_SIGNAL_RETURN resumes afterwards. */
static void deliver_signals(struct k_task *t)
{
    uint32_t *frame = t->frame - K_FRAME_WORDS;
    for (int i = 0; i < K_FRAME_WORDS; i++)
        frame[i] = 0;
    frame[K_PC] = (uint32_t)signal_trampoline;
    frame[K_SP] = (uint32_t)t->frame;
    frame[K_A0] = t->signals;
    frame[K_A1] = (uint32_t)t->handler;
    frame[K_STATUS] = port_task_status();
    t->interrupted = t->frame;
    t->frame = frame;
    t->signals = 0;
    t->in_handler = 1;
}

uint32_t *k_trap(uint32_t *frame, uint32_t cause)
{
    current->frame = frame;
    int yielding = 0;
    if (port_cause_is_syscall(cause)) {
        port_syscall_return(frame);
        yielding = frame[K_A7] == SYS_YIELD;
        syscall(frame);
    } else {
        uint32_t pending = port_pending_irqs(cause);
        for (int irq = 0; pending; irq++, pending >>= 1)
            if ((pending & 1) && irq_handlers[irq])
                irq_handlers[irq]();
    }
    struct k_task *next = choose(yielding);
    if (next != current) {
        k_switches++;
        current = next;
    }
    if (current->signals && current->handler && !current->in_handler)
        deliver_signals(current);
    return current->frame;
}

void k_yield(void) { port_syscall(SYS_YIELD, 0, 0); }
void k_sem_wait(k_sem_t *sem) { port_syscall(SYS_SEM_WAIT, (uint32_t)sem, 0); }
void k_sem_post(k_sem_t *sem) { port_syscall(SYS_SEM_POST, (uint32_t)sem, 0); }
void k_queue_send(k_queue_t *queue, uint32_t message) { port_syscall(SYS_QUEUE_SEND, (uint32_t)queue, message); }
uint32_t k_queue_receive(k_queue_t *queue) { return port_syscall(SYS_QUEUE_RECEIVE, (uint32_t)queue, 0); }
void k_signal(k_task_t *task, uint32_t signals) { port_syscall(SYS_SIGNAL, (uint32_t)task, signals); }
void k_signal_handler(k_signal_handler_t handler) { port_syscall(SYS_SIGNAL_HANDLER, (uint32_t)handler, 0); }
void k_pause(void) { port_syscall(SYS_PAUSE, 0, 0); }
k_task_t *k_self(void) { return current; }
