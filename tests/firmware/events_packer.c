/*
 * firmware/main.c's EVENTS packer on a fake CSR bus (tests/firmware/test_events_packer.py): the
 * capture FIFO serves the records given on stdin, one line each, "timestamp info fraction"
 * (decimal; info is capture_ev_info's word, fraction the capture_ev_fraction CSR's value on a SoC
 * that has it, else unused). The host's HELLO (argv[1], hex, delimiter included) arrives on the UART
 * first; the records become pending only once the firmware has answered it (HELLO discards what the
 * FIFO holds). Everything the rig sent on the UART is printed as hex on one line.
 *
 * The fake gives each register the values of the record at the FIFO's head until the pop: a
 * firmware that read a record's fraction after popping it would send the next record's.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CSR_ACCESSORS_DEFINED
static void csr_write_simple(unsigned long v, unsigned long a);
static unsigned long csr_read_simple(unsigned long a);

#define HILAT_FIRMWARE_NO_MAIN
#include "main.c"

#define CSR_SPACE 0x10000u
#define MAX_RECORDS 4096u
static uint32_t regs[CSR_SPACE / 4];
static uint64_t fake_ticks;
static struct {
    uint64_t timestamp, fraction;
    uint32_t info;
} records[MAX_RECORDS];
static size_t n_records, head;
static int live; /* the records are in the FIFO */
static uint8_t hello[HILAT_MAX_WIRE], tx[1u << 20];
static size_t hello_len, hello_pos, tx_len;

static uint32_t *reg(unsigned long a)
{
    if (a < CSR_BASE || a >= CSR_BASE + CSR_SPACE || (a & 3u)) {
        fprintf(stderr, "CSR access at %#lx\n", a);
        exit(2);
    }
    return &regs[(a - CSR_BASE) / 4];
}

static void csr_write_simple(unsigned long v, unsigned long a)
{
    if (a == CSR_UART_RXTX_ADDR) {
        tx[tx_len++] = (uint8_t)v;
        return;
    }
    if (a == CSR_CAPTURE_EV_POP_ADDR && live && head < n_records)
        head++;
    *reg(a) = (uint32_t)v;
}

static unsigned long csr_read_simple(unsigned long a)
{
    int pending = live && head < n_records;
    if (a == CSR_UART_RXEMPTY_ADDR)
        return hello_pos >= hello_len;
    if (a == CSR_UART_RXTX_ADDR)
        return hello[hello_pos++];
    if (a == CSR_UART_TXFULL_ADDR)
        return 0;
    if (a == CSR_TIMEBASE_STATUS_ADDR || a == CSR_CAPTURE_STATUS_ADDR)
        return 1; /* latched / snapshot taken */
    if (a == CSR_TIMEBASE_VALUE_ADDR)
        return (uint32_t)(fake_ticks >> 32);
    if (a == CSR_TIMEBASE_VALUE_ADDR + 4) {
        fake_ticks += 5000;
        return (uint32_t)fake_ticks;
    }
    if (a == CSR_CAPTURE_EV_STATUS_ADDR)
        return FIELD(CAPTURE_EV_STATUS, PENDING, pending);
    if (pending && a == CSR_CAPTURE_EV_TIMESTAMP_ADDR) /* 64-bit CSRs: the most significant word first */
        return (uint32_t)(records[head].timestamp >> 32);
    if (pending && a == CSR_CAPTURE_EV_TIMESTAMP_ADDR + 4)
        return (uint32_t)records[head].timestamp;
    if (pending && a == CSR_CAPTURE_EV_INFO_ADDR)
        return records[head].info;
#ifdef CSR_CAPTURE_EV_FRACTION_ADDR
    for (unsigned w = 0; w < CSR_CAPTURE_EV_FRACTION_SIZE; w++)
        if (pending && a == (unsigned long)CSR_CAPTURE_EV_FRACTION_ADDR + 4u * w)
            return (uint32_t)(records[head].fraction >> (32u * (CSR_CAPTURE_EV_FRACTION_SIZE - 1u - w)));
#endif
    return *reg(a);
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    for (const char *h = argv[1]; h[0] && h[1] && hello_len < sizeof hello; h += 2) {
        unsigned byte;
        if (sscanf(h, "%2x", &byte) != 1)
            return 2;
        hello[hello_len++] = (uint8_t)byte;
    }
    unsigned long long t, info, fraction;
    while (n_records < MAX_RECORDS && scanf("%llu %llu %llu", &t, &info, &fraction) == 3) {
        records[n_records].timestamp = t;
        records[n_records].info = (uint32_t)info;
        records[n_records].fraction = fraction;
        n_records++;
    }
    init();
    for (int pass = 0; pass < 1000 && !(hello_pos == hello_len && tx_len); pass++)
        service();
    live = 1;
    /* Every record popped, then the idle polls that send the last frame. */
    for (unsigned pass = 0, idle = 0; pass < 1000000u && idle < 4u * IDLE_FLUSH_LOOPS; pass++) {
        service();
        idle = head < n_records ? 0 : idle + 1;
    }
    for (size_t i = 0; i < tx_len; i++)
        printf("%02x", tx[i]);
    printf("\n");
    return head == n_records ? 0 : 1;
}
