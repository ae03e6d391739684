/* The fake Ethernet rig's stream sender (tests/host/udp_rig.py starts it): the stream rig's pattern
 * of stimulus, ISR and task records in datagrams of docs/ethernet.md, sent with sendmmsg at a given
 * rate (datagrams/s, 0: as fast as it can), its progress in a status file the rig reads.
 *
 *   udp_sender DST_IP DST_PORT SESSION START_TICK PERIOD STIMULI RATE N_CHANNELS TABLE STATUS
 *
 * TABLE: the records of one pattern cycle as uint32 quadruples (stimulus in the cycle, offset from
 * its tick, channel mask, levels), in order. STATUS: 32 bytes, u64 datagrams sent, records sent,
 * tick of the last record, done (1 once every stimulus is sent; the sender then exits and the rig
 * sends the heartbeats). Built by the benchmark and the test with cc -O2.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#define MAX_PAYLOAD 1472
#define HEADER_BYTES 36
#define RECORDS_PER_DATAGRAM ((MAX_PAYLOAD - HEADER_BYTES) / 8)
#define BATCH 64

struct cycle_record { uint32_t stim, offset, mask, levels; };

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put_u16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }
static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }

int main(int argc, char **argv)
{
    if (argc != 11) {
        fprintf(stderr, "usage: %s DST_IP DST_PORT SESSION START_TICK PERIOD STIMULI RATE N_CHANNELS TABLE STATUS\n",
                argv[0]);
        return 2;
    }
    const char *dst_ip = argv[1];
    int dst_port = atoi(argv[2]);
    uint32_t session = (uint32_t)strtoul(argv[3], NULL, 0);
    uint64_t start = strtoull(argv[4], NULL, 0);
    uint64_t period = strtoull(argv[5], NULL, 0);
    uint64_t stimuli = strtoull(argv[6], NULL, 0);
    double rate = atof(argv[7]);
    int n_channels = atoi(argv[8]);

    FILE *tf = fopen(argv[9], "rb");
    if (!tf) { perror(argv[9]); return 1; }
    struct cycle_record table[4096];
    size_t n_table = fread(table, sizeof table[0], 4096, tf);
    fclose(tf);
    if (!n_table) { fprintf(stderr, "%s: no records\n", argv[9]); return 2; }

    int sfd = open(argv[10], O_RDWR);
    if (sfd < 0) { perror(argv[10]); return 1; }
    volatile uint64_t *status = mmap(NULL, 32, PROT_READ | PROT_WRITE, MAP_SHARED, sfd, 0);
    if (status == MAP_FAILED) { perror("mmap"); return 1; }

    int sock = socket(AF_INET, SOCK_DGRAM, 0);
    int sndbuf = 4 << 20;
    setsockopt(sock, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    struct sockaddr_in dst = { .sin_family = AF_INET, .sin_port = htons(dst_port) };
    if (inet_pton(AF_INET, dst_ip, &dst.sin_addr) != 1) { fprintf(stderr, "bad address %s\n", dst_ip); return 2; }
    if (connect(sock, (struct sockaddr *)&dst, sizeof dst) < 0) { perror("connect"); return 1; }

    static uint8_t bufs[BATCH][MAX_PAYLOAD];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }

    uint64_t seq = 0, records = 0, last_tick = 0, stim = 0;
    size_t t_at = 0;          /* the next record: stimulus `stim`, table entry t_at (of its cycle) */
    double t0 = now_s();
    while (stim < stimuli) {
        int n = 0;
        for (; n < BATCH && stim < stimuli; n++) {
            uint8_t *d = bufs[n];
            uint16_t count = 0;
            uint64_t base = 0;
            uint64_t first_index = records;
            while (count < RECORDS_PER_DATAGRAM && stim < stimuli) {
                const struct cycle_record *r = &table[t_at];
                uint64_t tick = start + stim * period + r->offset;
                if (count == 0)
                    base = tick;
                uint64_t word = (tick - base) | (uint64_t)r->mask << 32 | (uint64_t)r->levels << (32 + n_channels);
                put_u64(d + HEADER_BYTES + 8 * count, word);
                count++;
                last_tick = tick;
                t_at++;
                if (t_at == n_table || table[t_at].stim != table[t_at - 1].stim) {   /* the next stimulus */
                    stim++;
                    if (t_at == n_table)
                        t_at = 0;
                }
            }
            put_u32(d, 0x54414C48);
            d[4] = 1; d[5] = 0; d[6] = 2; d[7] = 9;
            put_u32(d + 8, session);
            put_u32(d + 12, (uint32_t)seq);
            put_u64(d + 16, first_index);
            put_u64(d + 24, base);
            put_u16(d + 32, count);
            put_u16(d + 34, 0);
            iov[n].iov_len = HEADER_BYTES + 8 * count;
            records += count;
            seq++;
        }
        if (rate > 0) {   /* pace: datagram k leaves no sooner than k / rate s after the start */
            double due = t0 + (double)(seq - n) / rate;
            double wait;
            while ((wait = due - now_s()) > 0) {
                struct timespec ts = { (time_t)wait, (long)((wait - (time_t)wait) * 1e9) };
                nanosleep(&ts, NULL);
            }
        }
        int done = 0;
        while (done < n) {
            int k = sendmmsg(sock, msgs + done, n - done, 0);
            if (k < 0) {
                /* ECONNREFUSED: the receiver's port is closed for a moment (an ICMP answer); go on */
                continue;
            }
            done += k;
        }
        status[0] = seq;
        status[1] = records;
        status[2] = last_tick;
    }
    /* The link's rate as sent (the benchmark reads it from the rig's stdout). */
    printf("udp_sender: %llu datagrams, %llu records in %.6f s\n", (unsigned long long)seq,
           (unsigned long long)records, now_s() - t0);
    fflush(stdout);
    status[3] = 1;
    munmap((void *)status, 32);
    close(sfd);
    close(sock);
    return 0;
}
