/*
 * Host-side driver of firmware/protocol.c for the protocol tests. Reads one request per line on
 * stdin and writes one answer line per request on stdout. Tokens are separated by spaces; numbers
 * are decimal; byte strings are hex ("-" for empty).
 *
 * Encode (answer: the wire bytes in hex, delimiter included, or "err nofit [index]"):
 *   identify SEQ version ts_hz sys_hz n_stimulus n_inputs fifo_depth pin_to_stamp_delay
 *            capabilities min_interval glitch_max start_margin samples_per_tick FIRMWARE_HEX GATEWARE_HEX
 *            CHANNELS_HEX (the table as "name:role,name:role,...", as soc.h's HILAT_CHANNELS) uart_baud
 *            ethernet [ip mac command_port stream_port record_words max_records] (when ethernet is 1;
 *            mac as the 48-bit number whose bytes, most significant first, are the wire order)
 *            tdc_inputs tdc_taps
 *   events   SEQ base N {timestamp channels levels fraction} x N mask_bytes fraction_bytes
 *            (absolute timestamps)
 *   overflow SEQ timestamp channels
 *   status   SEQ records_sent events_sent frames_sent overflow N {dropped} x N STIM_N {status} x STIM_N
 *            FIRED_N {fired} x FIRED_N   (FIRED_N 0: the older body without the counts)
 *   ack      SEQ command_seq code MESSAGE_HEX
 *   time     SEQ command_seq now
 *   engine_stats SEQ command_seq state samples samples_lost bins_lost outliers_lost trigger_delay
 *            min_spacing interval_shift_min bins 3 {misses duplicates below
 *            {count min max sum} x 2 (untagged, tagged)} x 3
 *   engine_bins SEQ N {type kind tag interval bin count} x N   (answer "err nofit|range INDEX" when
 *            hilat_engine_bins_add_* refuses entry INDEX)
 *   engine_outliers SEQ N {start flags value0 value1 value2} x N
 *   stream_status SEQ command_seq enabled link session dst_ip dst_port flush_us heartbeat_ms datagrams
 *            records rx_frames command_dropped
 *   commands, with the generic frame builder (same fields as the answer of "parse"):
 *   hello SEQ version | stim_config SEQ channel mode invert width period jitter probability
 *   burst_count burst_spacing count seed | capture_config SEQ N {flags glitch} x N |
 *   start SEQ channels at_time start | stop SEQ channels | status_req SEQ | time_req SEQ |
 *   engine_config SEQ flags start_channel start_level isr_channel isr_level task_channel task_level
 *   tag_channel tag_level deadline offset interval_shift 3 {threshold} x 3 trigger_response
 *   trigger_threshold trigger_width | engine_stats_req SEQ | engine_flush SEQ |
 *   stream_config SEQ enable session dst_ip dst_port flush_us heartbeat_ms | stream_status_req SEQ |
 *   net_config SEQ ip mac (mac as in identify)
 * Parse (hilat_parse_command):
 *   parse WIRE_HEX (without delimiter) -> the command line as above, or "err REASON [type seq]"
 * Primitives:
 *   crc HEX -> 8 hex digits | cobs_enc HEX -> HEX | cobs_dec HEX -> HEX or "err REASON"
 * Stream (hilat_rx_feed + hilat_parse_command on every frame):
 *   stream HEX -> "frames_ok=A corrupt=B wrong_version=C unknown_type=D malformed=E
 *                  resync_bytes=F seqs=S1,S2,..." (seqs of the accepted commands, "-" if none)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

#define MAX_LINE (1u << 22)
#define MAX_BYTES (MAX_LINE / 2u)

static char line[MAX_LINE];
static uint8_t bytes[MAX_BYTES];
static uint8_t bytes2[MAX_BYTES + MAX_BYTES / 254u + 16u];

static int failed;

static void fail(const char *why)
{
    printf("bad request: %s\n", why);
    failed = 1;
}

static char *next_tok(void)
{
    return strtok(NULL, " \t\r\n");
}

static int num(unsigned long long *v)
{
    char *t = next_tok(), *end;
    if (!t)
        return 0;
    *v = strtoull(t, &end, 10);
    return *end == '\0';
}

/* Reads a number into *v; on a malformed request, bails out of the calling function. */
#define NUM(v)                     \
    do {                           \
        if (!num(&(v))) {          \
            fail("number");        \
            return;                \
        }                          \
    } while (0)

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Hex token into out (cap bytes); returns the length or -1. */
static long hex(uint8_t *out, size_t cap)
{
    char *t = next_tok();
    size_t n, i;
    if (!t)
        return -1;
    if (strcmp(t, "-") == 0)
        return 0;
    n = strlen(t);
    if (n % 2 || n / 2 > cap)
        return -1;
    for (i = 0; i < n / 2; i++) {
        int hi = hexval(t[2 * i]), lo = hexval(t[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi * 16 + lo);
    }
    return (long)(n / 2);
}

static void print_hex(const uint8_t *p, size_t n)
{
    size_t i;
    if (n == 0)
        fputs("-", stdout);
    for (i = 0; i < n; i++)
        printf("%02x", p[i]);
}

static void finish(hilat_frame_t *f, int ok)
{
    uint8_t out[HILAT_MAX_WIRE];
    size_t n;
    if (!ok) {
        puts("err nofit");
        return;
    }
    n = hilat_frame_finish(f, out, sizeof out);
    if (n == 0) {
        puts("err finish");
        return;
    }
    print_hex(out, n);
    putchar('\n');
}

/* A frame built record by record (EVENTS, ENGINE_BINS, ENGINE_OUTLIERS): it counted them all. */
static void finish_records(hilat_frame_t *f, unsigned long long n)
{
    if (f->records != n)
        puts("err records");
    else
        finish(f, 1);
}

static const char *err_name(int r)
{
    switch (r) {
    case HILAT_ERR_COBS:
        return "cobs";
    case HILAT_ERR_SHORT:
        return "short";
    case HILAT_ERR_TOO_LONG:
        return "too_long";
    case HILAT_ERR_CRC:
        return "crc";
    case HILAT_ERR_VERSION:
        return "version";
    case HILAT_ERR_UNKNOWN_TYPE:
        return "unknown_type";
    case HILAT_ERR_BAD_LENGTH:
        return "bad_length";
    case HILAT_ERR_RANGE:
        return "range";
    default:
        return "?";
    }
}

/* ---- encoders ---- */

/* A MAC as its 48-bit number, most significant byte first on the wire. */
static void mac_bytes(uint8_t *mac, unsigned long long v)
{
    unsigned i;
    for (i = 0; i < HILAT_MAC_BYTES; i++)
        mac[i] = (uint8_t)(v >> (8 * (HILAT_MAC_BYTES - 1 - i)));
}

static unsigned long long mac_number(const uint8_t *mac)
{
    unsigned long long v = 0;
    unsigned i;
    for (i = 0; i < HILAT_MAC_BYTES; i++)
        v = v << 8 | mac[i];
    return v;
}

static void do_identify(uint16_t seq)
{
    static char fw[256], gw[256], channels[1024];
    unsigned long long v[12];
    hilat_identify_t m;
    hilat_frame_t f;
    long nf, ng, nc;
    int i;
    for (i = 0; i < 12; i++)
        NUM(v[i]);
    nf = hex((uint8_t *)fw, 255);
    ng = hex((uint8_t *)gw, 255);
    nc = hex((uint8_t *)channels, sizeof channels - 1);
    if (nf < 0 || ng < 0 || nc < 0) {
        fail("hex");
        return;
    }
    fw[nf] = gw[ng] = channels[nc] = '\0';
    m.version = (uint8_t)v[0];
    m.ts_hz = (uint32_t)v[1];
    m.sys_hz = (uint32_t)v[2];
    m.n_stimulus = (uint8_t)v[3];
    m.n_inputs = (uint8_t)v[4];
    m.fifo_depth = (uint16_t)v[5];
    m.pin_to_stamp_delay = (uint8_t)v[6];
    m.capabilities = (uint32_t)v[7];
    m.min_interval = (uint16_t)v[8];
    m.glitch_max = (uint8_t)v[9];
    m.start_margin = (uint32_t)v[10];
    m.samples_per_tick = (uint8_t)v[11];
    m.firmware = fw;
    m.gateware = nf || ng ? gw : NULL; /* NULL is the empty string too */
    m.channels = channels;
    NUM(v[0]);
    m.uart_baud = (uint32_t)v[0];
    NUM(v[0]);
    m.ethernet = (uint8_t)v[0];
    if (m.ethernet) {
        for (i = 0; i < 6; i++)
            NUM(v[i]);
        m.eth_ip = (uint32_t)v[0];
        mac_bytes(m.eth_mac, v[1]);
        m.eth_command_port = (uint16_t)v[2];
        m.eth_stream_port = (uint16_t)v[3];
        m.eth_record_words = (uint8_t)v[4];
        m.eth_max_records = (uint16_t)v[5];
    }
    NUM(v[0]);
    NUM(v[1]);
    m.tdc_inputs = (uint8_t)v[0];
    m.tdc_taps = (uint16_t)v[1];
    finish(&f, hilat_msg_identify(&f, seq, &m));
}

/* events SEQ base N {timestamp channels levels fraction} x N mask_bytes fraction_bytes */
static void do_events(uint16_t seq)
{
    static unsigned long long recs[256][4];
    unsigned long long base, n, i, mask_bytes, fraction_bytes;
    hilat_frame_t f;
    NUM(base);
    NUM(n);
    if (n > 256) {
        fail("n");
        return;
    }
    for (i = 0; i < n; i++) {
        NUM(recs[i][0]);
        NUM(recs[i][1]);
        NUM(recs[i][2]);
        NUM(recs[i][3]);
    }
    NUM(mask_bytes);
    NUM(fraction_bytes);
    hilat_events_begin(&f, seq, base, (uint8_t)mask_bytes, (uint8_t)fraction_bytes);
    for (i = 0; i < n; i++) {
        if (!hilat_events_add(&f, recs[i][0], (uint16_t)recs[i][1], (uint16_t)recs[i][2], recs[i][3])) {
            printf("err nofit %llu\n", i);
            return;
        }
    }
    finish_records(&f, n);
}

static void do_overflow(uint16_t seq)
{
    unsigned long long ts, ch;
    hilat_frame_t f;
    NUM(ts);
    NUM(ch);
    finish(&f, hilat_msg_overflow(&f, seq, ts, (uint16_t)ch));
}

static void do_status(uint16_t seq)
{
    unsigned long long v[4], n, x;
    hilat_status_t m;
    hilat_frame_t f;
    unsigned i;
    for (i = 0; i < 4; i++)
        NUM(v[i]);
    m.records_sent = (uint32_t)v[0];
    m.events_sent = (uint32_t)v[1];
    m.frames_sent = (uint32_t)v[2];
    m.overflow = (uint8_t)v[3];
    NUM(n);
    if (n > HILAT_MAX_CHANNELS) {
        fail("n");
        return;
    }
    m.n = (uint8_t)n;
    for (i = 0; i < n; i++) {
        NUM(x);
        m.dropped[i] = (uint32_t)x;
    }
    NUM(n);
    if (n > HILAT_MAX_STIMULUS) {
        fail("stim_n");
        return;
    }
    m.stim_n = (uint8_t)n;
    for (i = 0; i < n; i++) {
        NUM(x);
        m.stim_status[i] = (uint8_t)x;
    }
    NUM(n);
    if (n > HILAT_MAX_STIMULUS) {
        fail("fired_n");
        return;
    }
    m.fired_n = (uint8_t)n;
    for (i = 0; i < n; i++) {
        NUM(x);
        m.fired[i] = (uint32_t)x;
    }
    finish(&f, hilat_msg_status(&f, seq, &m));
}

static void do_ack(uint16_t seq)
{
    static char msg[256];
    unsigned long long cs, code;
    hilat_frame_t f;
    long n;
    NUM(cs);
    NUM(code);
    n = hex((uint8_t *)msg, 255);
    if (n < 0) {
        fail("hex");
        return;
    }
    msg[n] = '\0';
    finish(&f, hilat_msg_ack(&f, seq, (uint16_t)cs, (uint8_t)code, n ? msg : NULL));
}

static void do_time(uint16_t seq)
{
    unsigned long long cs, now;
    hilat_frame_t f;
    NUM(cs);
    NUM(now);
    finish(&f, hilat_msg_time(&f, seq, (uint16_t)cs, now));
}

static void do_engine_stats(uint16_t seq)
{
    unsigned long long v[10], n, x[11];
    hilat_engine_stats_t m;
    hilat_frame_t f;
    unsigned i, k, t;
    for (i = 0; i < 10; i++)
        NUM(v[i]);
    NUM(n);
    if (n != HILAT_ENGINE_KINDS) {
        fail("kinds");
        return;
    }
    m.state = (uint8_t)v[1];
    m.samples = v[2];
    m.samples_lost = (uint32_t)v[3];
    m.bins_lost = (uint32_t)v[4];
    m.outliers_lost = (uint32_t)v[5];
    m.trigger_delay = (uint8_t)v[6];
    m.min_spacing = (uint8_t)v[7];
    m.interval_shift_min = (uint8_t)v[8];
    m.bins = (uint16_t)v[9];
    for (k = 0; k < HILAT_ENGINE_KINDS; k++) {
        hilat_engine_kind_stats_t *s = &m.kinds[k];
        for (i = 0; i < 11; i++)
            NUM(x[i]);
        s->misses = x[0];
        s->duplicates = x[1];
        s->below = x[2];
        for (t = 0; t < 2; t++) {
            s->tags[t].count = x[3 + 4 * t];
            s->tags[t].min = (uint32_t)x[4 + 4 * t];
            s->tags[t].max = (uint32_t)x[5 + 4 * t];
            s->tags[t].sum = x[6 + 4 * t];
        }
    }
    finish(&f, hilat_msg_engine_stats(&f, seq, (uint16_t)v[0], &m));
}

static void do_stream_status(uint16_t seq)
{
    unsigned long long v[12];
    hilat_stream_status_t m;
    hilat_frame_t f;
    unsigned i;
    for (i = 0; i < 12; i++)
        NUM(v[i]);
    m.enabled = (uint8_t)v[1];
    m.link = (uint8_t)v[2];
    m.session = (uint32_t)v[3];
    m.dst_ip = (uint32_t)v[4];
    m.dst_port = (uint16_t)v[5];
    m.flush_us = (uint16_t)v[6];
    m.heartbeat_ms = (uint16_t)v[7];
    m.datagrams = (uint32_t)v[8];
    m.records = v[9];
    m.rx_frames = (uint32_t)v[10];
    m.command_dropped = (uint32_t)v[11];
    finish(&f, hilat_msg_stream_status(&f, seq, (uint16_t)v[0], &m));
}

/* engine_bins SEQ N {type kind tag interval bin count} x N */
static void do_engine_bins(uint16_t seq)
{
    unsigned long long n, i, e[6];
    hilat_frame_t f;
    unsigned k;
    hilat_engine_bins_begin(&f, seq);
    NUM(n);
    for (i = 0; i < n; i++) {
        int r;
        for (k = 0; k < 6; k++)
            NUM(e[k]);
        if (e[0] == HILAT_ENGINE_ENTRY_CLOSE)
            r = hilat_engine_bins_add_close(&f, (uint8_t)e[1], (uint32_t)e[3]);
        else
            r = hilat_engine_bins_add_bin(&f, (uint8_t)e[1], (uint8_t)e[2], (uint32_t)e[3], (uint16_t)e[4], e[5]);
        if (r != 1) {
            printf("err %s %llu\n", r == 0 ? "nofit" : "range", i);
            return;
        }
    }
    finish_records(&f, n);
}

/* engine_outliers SEQ N {start flags value0 value1 value2} x N */
static void do_engine_outliers(uint16_t seq)
{
    unsigned long long n, i, start, flags, v;
    uint32_t values[HILAT_ENGINE_KINDS];
    hilat_frame_t f;
    unsigned k;
    hilat_engine_outliers_begin(&f, seq);
    NUM(n);
    for (i = 0; i < n; i++) {
        NUM(start);
        NUM(flags);
        for (k = 0; k < HILAT_ENGINE_KINDS; k++) {
            NUM(v);
            values[k] = (uint32_t)v;
        }
        if (!hilat_engine_outliers_add(&f, start, (uint8_t)flags, values)) {
            printf("err nofit %llu\n", i);
            return;
        }
    }
    finish_records(&f, n);
}

/* Commands: a list of (width in bytes, 0 = count-prefixed list follows) per type. */
static void do_command(uint8_t type, uint16_t seq)
{
    static const uint8_t stim[] = {1, 1, 1, 4, 4, 4, 4, 2, 4, 4, 4};
    /* ENGINE_CONFIG; 3: the thresholds' count, not sent */
    static const uint8_t engine[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 4, 2, 1, 3, 4, 4, 4, 1, 4, 2};
    static const uint8_t stream[] = {1, 4, 4, 2, 2, 2}; /* STREAM_CONFIG */
    unsigned long long v, n, i;
    hilat_frame_t f;
    int ok = 1;
    hilat_frame_begin(&f, type, seq);
    switch (type) {
    case HILAT_MSG_HELLO:
    case HILAT_MSG_STOP:
        NUM(v);
        ok = hilat_frame_put_u8(&f, (uint8_t)v);
        break;
    case HILAT_MSG_STIM_CONFIG:
    case HILAT_MSG_ENGINE_CONFIG:
    case HILAT_MSG_STREAM_CONFIG: {
        const uint8_t *widths = type == HILAT_MSG_STIM_CONFIG ? stim : type == HILAT_MSG_STREAM_CONFIG ? stream : engine;
        size_t count = type == HILAT_MSG_STIM_CONFIG ? sizeof stim : type == HILAT_MSG_STREAM_CONFIG ? sizeof stream
                                                                                                  : sizeof engine;
        for (i = 0; i < count; i++) {
            NUM(v);
            if (widths[i] == 3) {
                if (v != HILAT_ENGINE_KINDS) {
                    fail("thresholds");
                    return;
                }
            } else if (widths[i] == 1)
                ok &= hilat_frame_put_u8(&f, (uint8_t)v);
            else if (widths[i] == 2)
                ok &= hilat_frame_put_u16(&f, (uint16_t)v);
            else
                ok &= hilat_frame_put_u32(&f, (uint32_t)v);
        }
        break;
    }
    case HILAT_MSG_CAPTURE_CONFIG:
        NUM(n);
        ok = hilat_frame_put_u8(&f, (uint8_t)n);
        for (i = 0; i < 2 * n; i++) {
            NUM(v);
            ok &= hilat_frame_put_u8(&f, (uint8_t)v);
        }
        break;
    case HILAT_MSG_START:
        NUM(v);
        ok &= hilat_frame_put_u8(&f, (uint8_t)v);
        NUM(v);
        ok &= hilat_frame_put_u8(&f, (uint8_t)v);
        NUM(v);
        ok &= hilat_frame_put_u64(&f, v);
        break;
    case HILAT_MSG_NET_CONFIG: {
        uint8_t mac[HILAT_MAC_BYTES];
        NUM(v);
        ok &= hilat_frame_put_u32(&f, (uint32_t)v);
        NUM(v);
        mac_bytes(mac, v);
        ok &= hilat_frame_put_bytes(&f, mac, sizeof mac);
        break;
    }
    default: /* STATUS_REQ, TIME_REQ, ENGINE_STATS_REQ, ENGINE_FLUSH, STREAM_STATUS_REQ: no body */
        break;
    }
    finish(&f, ok);
}

/* ---- parser ---- */

static void print_command(const hilat_command_t *c)
{
    unsigned i;
    switch (c->type) {
    case HILAT_MSG_HELLO:
        printf("hello %u %u", c->seq, c->u.hello.version);
        break;
    case HILAT_MSG_STIM_CONFIG: {
        const hilat_stim_config_t *s = &c->u.stim_config;
        printf("stim_config %u %u %u %u %lu %lu %lu %lu %u %lu %lu %lu", c->seq, s->channel, s->mode,
               s->invert, (unsigned long)s->width, (unsigned long)s->period, (unsigned long)s->jitter,
               (unsigned long)s->probability, s->burst_count, (unsigned long)s->burst_spacing,
               (unsigned long)s->count, (unsigned long)s->seed);
        break;
    }
    case HILAT_MSG_CAPTURE_CONFIG:
        printf("capture_config %u %u", c->seq, c->u.capture_config.n);
        for (i = 0; i < c->u.capture_config.n; i++)
            printf(" %u %u", c->u.capture_config.flags[i], c->u.capture_config.glitch[i]);
        break;
    case HILAT_MSG_START:
        printf("start %u %u %u %llu", c->seq, c->u.start.channels, c->u.start.at_time,
               (unsigned long long)c->u.start.start);
        break;
    case HILAT_MSG_STOP:
        printf("stop %u %u", c->seq, c->u.stop.channels);
        break;
    case HILAT_MSG_STATUS_REQ:
        printf("status_req %u", c->seq);
        break;
    case HILAT_MSG_TIME_REQ:
        printf("time_req %u", c->seq);
        break;
    case HILAT_MSG_ENGINE_CONFIG: {
        const hilat_engine_config_t *e = &c->u.engine_config;
        printf("engine_config %u %u %u %u %u %u %u %u %u %u %lu %u %u 3 %lu %lu %lu %u %lu %u", c->seq, e->flags,
               e->start_channel, e->start_level, e->isr_channel, e->isr_level, e->task_channel, e->task_level,
               e->tag_channel, e->tag_level, (unsigned long)e->deadline, e->offset, e->interval_shift,
               (unsigned long)e->threshold[0], (unsigned long)e->threshold[1], (unsigned long)e->threshold[2],
               e->trigger_response, (unsigned long)e->trigger_threshold, e->trigger_width);
        break;
    }
    case HILAT_MSG_ENGINE_STATS_REQ:
        printf("engine_stats_req %u", c->seq);
        break;
    case HILAT_MSG_ENGINE_FLUSH:
        printf("engine_flush %u", c->seq);
        break;
    case HILAT_MSG_STREAM_CONFIG: {
        const hilat_stream_config_t *s = &c->u.stream_config;
        printf("stream_config %u %u %lu %lu %u %u %u", c->seq, s->enable, (unsigned long)s->session,
               (unsigned long)s->dst_ip, s->dst_port, s->flush_us, s->heartbeat_ms);
        break;
    }
    case HILAT_MSG_STREAM_STATUS_REQ:
        printf("stream_status_req %u", c->seq);
        break;
    case HILAT_MSG_NET_CONFIG:
        printf("net_config %u %lu %llu", c->seq, (unsigned long)c->u.net_config.ip, mac_number(c->u.net_config.mac));
        break;
    default:
        printf("? %u", c->seq);
    }
    putchar('\n');
}

/* Exact-size heap copy of the request bytes, so that AddressSanitizer sees any over-read. */
static uint8_t *exact_copy(size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p) {
        puts("err malloc");
        exit(2);
    }
    memcpy(p, bytes, n);
    return p;
}

static void do_parse(void)
{
    hilat_command_t c;
    long n = hex(bytes, MAX_BYTES);
    uint8_t *in;
    int r;
    if (n < 0) {
        fail("hex");
        return;
    }
    in = exact_copy((size_t)n);
    r = hilat_parse_command(in, (size_t)n, &c);
    free(in);
    if (r == HILAT_OK)
        print_command(&c);
    else if (HILAT_IS_CORRUPT(r))
        printf("err %s\n", err_name(r));
    else
        printf("err %s %u %u\n", err_name(r), c.type, c.seq);
}

/* ---- primitives ---- */

static void do_crc(size_t n)
{
    /* The incremental form must agree with the one-shot form. */
    uint32_t a = hilat_crc32(bytes, n);
    uint32_t b = hilat_crc32_update(hilat_crc32_update(0, bytes, n / 3), bytes + n / 3, n - n / 3);
    if (a != b)
        puts("err incremental");
    else
        printf("%08lx\n", (unsigned long)a);
}

static void do_cobs_enc(size_t n)
{
    uint8_t *in = exact_copy(n), *out, *tight;
    size_t m = hilat_cobs_encode(in, n, bytes2, HILAT_COBS_MAX_ENCODED(n));
    int ok = m != 0;
    if (ok) {
        /* Exactly m bytes of room suffice; m - 1 are refused (ASan checks the writes). */
        out = malloc(m);
        tight = malloc(m - 1 ? m - 1 : 1);
        ok = out && tight && hilat_cobs_encode(in, n, out, m) == m && memcmp(out, bytes2, m) == 0 &&
             hilat_cobs_encode(in, n, tight, m - 1) == 0;
        free(out);
        free(tight);
    }
    free(in);
    if (!ok) {
        puts("err encode");
        return;
    }
    print_hex(bytes2, m);
    putchar('\n');
}

static void do_cobs_dec(size_t n)
{
    uint8_t *in = exact_copy(n), *out = NULL;
    size_t m = 0, m2;
    int r = hilat_cobs_decode(in, n, bytes2, sizeof bytes2, &m);
    if (r == HILAT_OK) {
        /* Exactly m bytes of room suffice, m - 1 are too few, and in place gives the same. */
        out = malloc(m ? m : 1);
        if (!out || hilat_cobs_decode(in, n, out, m, &m2) != HILAT_OK || m2 != m ||
            memcmp(out, bytes2, m) != 0)
            r = 1;
        else if (m && hilat_cobs_decode(in, n, out, m - 1, &m2) != HILAT_ERR_TOO_LONG)
            r = 1;
        else if (hilat_cobs_decode(in, n, in, n, &m2) != HILAT_OK || m2 != m || memcmp(in, bytes2, m) != 0)
            r = 1;
    }
    free(out);
    free(in);
    if (r == 1) {
        puts("err check");
    } else if (r != HILAT_OK) {
        printf("err %s\n", err_name(r));
    } else {
        print_hex(bytes2, m);
        putchar('\n');
    }
}

static void do_primitive(const char *what)
{
    long n = hex(bytes, MAX_BYTES);
    if (n < 0)
        fail("hex");
    else if (strcmp(what, "crc") == 0)
        do_crc((size_t)n);
    else if (strcmp(what, "cobs_enc") == 0)
        do_cobs_enc((size_t)n);
    else
        do_cobs_dec((size_t)n);
}

/* ---- stream ---- */

static void do_stream(void)
{
    static hilat_rx_t rx;
    unsigned long ok = 0, corrupt = 0, version = 0, unknown = 0, malformed = 0, resync = 0;
    long n = hex(bytes, MAX_BYTES), i;
    int any = 0;
    if (n < 0) {
        fail("hex");
        return;
    }
    hilat_rx_init(&rx);
    fputs("seqs=", stdout);
    for (i = 0; i < n; i++) {
        hilat_command_t c;
        size_t len = hilat_rx_feed(&rx, bytes[i]);
        int r;
        if (len == 0)
            continue;
        if (len > HILAT_MAX_ENCODED) {
            puts("err rx length");
            return;
        }
        r = hilat_parse_command(rx.buf, len, &c);
        if (r == HILAT_OK) {
            ok++;
            printf("%s%u", any ? "," : "", c.seq);
            any = 1;
        } else if (HILAT_IS_CORRUPT(r)) {
            corrupt++;
            resync += (unsigned long)len + 1;
        } else if (r == HILAT_ERR_VERSION) {
            version++;
        } else if (r == HILAT_ERR_UNKNOWN_TYPE) {
            unknown++;
        } else {
            malformed++;
        }
    }
    corrupt += rx.overlong;
    resync += rx.overlong_bytes;
    printf("%s frames_ok=%lu corrupt=%lu wrong_version=%lu unknown_type=%lu malformed=%lu "
           "resync_bytes=%lu\n",
           any ? "" : "-", ok, corrupt, version, unknown, malformed, resync);
}

int main(void)
{
    static const struct {
        const char *name;
        uint8_t type;
    } commands[] = {
        {"hello", HILAT_MSG_HELLO},           {"stim_config", HILAT_MSG_STIM_CONFIG},
        {"capture_config", HILAT_MSG_CAPTURE_CONFIG}, {"start", HILAT_MSG_START},
        {"stop", HILAT_MSG_STOP},             {"status_req", HILAT_MSG_STATUS_REQ},
        {"time_req", HILAT_MSG_TIME_REQ},     {"engine_config", HILAT_MSG_ENGINE_CONFIG},
        {"engine_stats_req", HILAT_MSG_ENGINE_STATS_REQ}, {"engine_flush", HILAT_MSG_ENGINE_FLUSH},
        {"stream_config", HILAT_MSG_STREAM_CONFIG}, {"stream_status_req", HILAT_MSG_STREAM_STATUS_REQ},
        {"net_config", HILAT_MSG_NET_CONFIG},
    };
    while (fgets(line, sizeof line, stdin)) {
        char *kind;
        unsigned long long seq;
        size_t k;
        if (!strchr(line, '\n') && !feof(stdin)) {
            puts("bad request: line too long");
            return 1;
        }
        kind = strtok(line, " \t\r\n");
        if (!kind) {
            puts("bad request: empty");
            failed = 1;
        } else if (strcmp(kind, "parse") == 0) {
            do_parse();
        } else if (strcmp(kind, "stream") == 0) {
            do_stream();
        } else if (strcmp(kind, "crc") == 0 || strcmp(kind, "cobs_enc") == 0 ||
                   strcmp(kind, "cobs_dec") == 0) {
            do_primitive(kind);
        } else if (!num(&seq) || seq > 0xFFFFu) {
            fail("seq");
        } else if (strcmp(kind, "identify") == 0) {
            do_identify((uint16_t)seq);
        } else if (strcmp(kind, "events") == 0) {
            do_events((uint16_t)seq);
        } else if (strcmp(kind, "overflow") == 0) {
            do_overflow((uint16_t)seq);
        } else if (strcmp(kind, "status") == 0) {
            do_status((uint16_t)seq);
        } else if (strcmp(kind, "ack") == 0) {
            do_ack((uint16_t)seq);
        } else if (strcmp(kind, "time") == 0) {
            do_time((uint16_t)seq);
        } else if (strcmp(kind, "engine_stats") == 0) {
            do_engine_stats((uint16_t)seq);
        } else if (strcmp(kind, "engine_bins") == 0) {
            do_engine_bins((uint16_t)seq);
        } else if (strcmp(kind, "engine_outliers") == 0) {
            do_engine_outliers((uint16_t)seq);
        } else if (strcmp(kind, "stream_status") == 0) {
            do_stream_status((uint16_t)seq);
        } else {
            for (k = 0; k < sizeof commands / sizeof commands[0]; k++)
                if (strcmp(kind, commands[k].name) == 0)
                    break;
            if (k == sizeof commands / sizeof commands[0])
                fail("kind");
            else
                do_command(commands[k].type, (uint16_t)seq);
        }
        fflush(stdout);
    }
    return failed;
}
