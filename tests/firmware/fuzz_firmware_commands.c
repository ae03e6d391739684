/*
 * libFuzzer target for the whole command path of the rig firmware: firmware/main.c (UART receive
 * ring, frame handling, every command handler) on a fake CSR bus, built against the simulated SoC's
 * generated csr.h / soc.h, under ASan + UBSan. LiteX lets a program supply its own CSR accessors
 * (CSR_ACCESSORS_DEFINED); these bounds-check every access and play the UART, the timebase and an
 * empty capture FIFO.
 *
 * Oracles:
 *  - every CSR access is aligned and inside the SoC's CSR space; no UART byte is read that the host
 *    did not send;
 *  - what the rig sends is a sequence of valid rig->host frames (COBS, CRC, version, type), with
 *    seq 0 at each IDENTIFY and consecutive after it;
 *  - the replies are exactly those the protocol asks for, worked out independently from the input
 *    with the (separately fuzzed) parser: nothing before HELLO but an ACK (version) to a HELLO of
 *    another version; IDENTIFY for each HELLO; after it, one reply per command (ACK naming the
 *    command's seq, TIME naming it, STATUS), ACK malformed for a refused non-corrupt frame, nothing
 *    for a corrupt one;
 *  - the engine's commands: on a SoC with the engine (csr.h has CSR_ENGINE_BASE) ENGINE_CONFIG and
 *    ENGINE_FLUSH get an ACK (done or refused), ENGINE_STATS_REQ an ENGINE_STATS naming it (244-byte
 *    body); ENGINE_BINS / ENGINE_OUTLIERS frames are no replies but keep the sequence. On a SoC
 *    without it they are refused (ACK refused, or malformed from a firmware that does not know them)
 *    and no engine frame is ever sent;
 *  - the Ethernet commands (STREAM_CONFIG, STREAM_STATUS_REQ, NET_CONFIG) on a SoC without Ethernet
 *    (no CSR_ETHSTREAM_BASE) are refused with ACK code 1, and IDENTIFY says ethernet 0;
 *  - a repeated command (the seq and CRC of the last command answered since HELLO; a HELLO of
 *    another version forgets it too) is answered with the earlier reply, byte for byte: the same
 *    seq, so it was not executed again (a second execution takes a new seq, and TIME a new time);
 *  - STATUS carries each stimulus channel's pulse count, read only after a snapshot was asked for
 *    (the fake count of channel ch is FAKE_FIRED(ch));
 *  - at the end, each stimulus channel's registers hold the last STIM_CONFIG acknowledged with code
 *    0 for it (reset values if none: a refused one writes nothing), and the capture registers the
 *    last CAPTURE_CONFIG acknowledged since the last HELLO (its flags, the glitch filter clamped).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CSR_ACCESSORS_DEFINED
static void csr_write_simple(unsigned long v, unsigned long a);
static unsigned long csr_read_simple(unsigned long a);

#define HILAT_FIRMWARE_NO_MAIN
#include "main.c"

#define CHECK(cond)            \
    do {                       \
        if (!(cond))           \
            __builtin_trap();  \
    } while (0)

/* ---- fake CSR bus ---- */

#define CSR_SPACE 0x10000u /* LiteX's CSR region: 64 KiB above CSR_BASE */
static uint32_t regs[CSR_SPACE / 4];
static const uint8_t *rx_data;
static size_t rx_len, rx_pos, rx_budget;
static uint8_t tx[1u << 20];
static size_t tx_len;
static uint64_t fake_ticks;

/* The stimulus channels' pulse counts: a snapshot asked (fired_control.snapshot written) and not
 * yet read. */
static int fired_asked[HILAT_N_STIMULUS];
#define FAKE_FIRED(ch) (0xF1000000u + 0x10101u * (uint32_t)(ch))

static uint32_t *reg(unsigned long a)
{
    CHECK(a >= (unsigned long)CSR_BASE && a < (unsigned long)CSR_BASE + CSR_SPACE && (a & 3u) == 0);
    return &regs[(a - (unsigned long)CSR_BASE) / 4];
}

static void csr_write_simple(unsigned long v, unsigned long a)
{
    if (a == CSR_UART_RXTX_ADDR) {
        CHECK(tx_len < sizeof tx);
        tx[tx_len++] = (uint8_t)v;
        return;
    }
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        if (a == STIM_REG(ch, FIRED_CONTROL) && GET(STIMULUS_CH0_FIRED_CONTROL, SNAPSHOT, v))
            fired_asked[ch] = 1;
    *reg(a) = (uint32_t)v;
}

#ifdef CSR_ENGINE_BASE
#define HAS_ENGINE 1
#else
#define HAS_ENGINE 0
#endif

static unsigned long csr_read_simple(unsigned long a)
{
    uint32_t *r = reg(a);
#ifdef CSR_ENGINE_STATUS_ADDR
    if (a == CSR_ENGINE_STATUS_ADDR) /* an idle engine: snapshot taken, flushed, nothing in flight */
        return FIELD(ENGINE_STATUS, VALID, 1) | FIELD(ENGINE_STATUS, FLUSHED, 1);
#endif
    if (a == CSR_UART_RXEMPTY_ADDR)
        return rx_pos >= rx_len || rx_budget == 0; /* a few bytes per pass: the ring never fills */
    if (a == CSR_UART_RXTX_ADDR) {
        CHECK(rx_pos < rx_len && rx_budget > 0);
        rx_budget--;
        return rx_data[rx_pos++];
    }
    if (a == CSR_UART_TXFULL_ADDR || a == CSR_CAPTURE_EV_STATUS_ADDR)
        return 0;
    if (a == CSR_TIMEBASE_STATUS_ADDR || a == CSR_CAPTURE_STATUS_ADDR)
        return 1; /* latched / snapshot taken */
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++) {
        if (a == STIM_REG(ch, FIRED_STATUS)) {
            CHECK(fired_asked[ch]); /* else the firmware would wait forever */
            return FIELD(STIMULUS_CH0_FIRED_STATUS, VALID, 1);
        }
        if (a == STIM_REG(ch, FIRED)) {
            CHECK(fired_asked[ch]);
            fired_asked[ch] = 0;
            return FAKE_FIRED(ch);
        }
    }
    if (a == CSR_TIMEBASE_VALUE_ADDR)
        return (uint32_t)(fake_ticks >> 32);
    if (a == CSR_TIMEBASE_VALUE_ADDR + 4) {
        fake_ticks += 5000;
        return (uint32_t)fake_ticks;
    }
    return *r;
}

/* ---- expected replies, from the input alone ---- */

enum { R_IDENTIFY, R_ACK, R_ACK_REFUSED, R_ACK_VERSION, R_TIME, R_STATUS, R_ENGINE_STATS, R_NO_ENGINE,
       R_NO_ETHERNET, R_REPEAT };
typedef struct {
    uint8_t kind;
    uint16_t command_seq;
    size_t repeats;      /* R_REPEAT: the index of the reply it repeats */
    hilat_command_t cmd; /* R_ACK: the command, for the register check */
} expected_t;

#define MAX_EXPECTED 4096u
static expected_t expected[MAX_EXPECTED];
static size_t n_expected;
/* Where each expected reply was found in tx (start, length with the delimiter). */
static size_t reply_at[MAX_EXPECTED], reply_len[MAX_EXPECTED];

static void expect(uint8_t kind, const hilat_command_t *cmd)
{
    CHECK(n_expected < MAX_EXPECTED);
    expected[n_expected].kind = kind;
    expected[n_expected].command_seq = cmd->seq;
    expected[n_expected].cmd = *cmd;
    n_expected++;
}

static int is_ethernet_command(uint8_t type)
{
    return type == HILAT_MSG_STREAM_CONFIG || type == HILAT_MSG_STREAM_STATUS_REQ || type == HILAT_MSG_NET_CONFIG;
}

static void work_out_replies(const uint8_t *data, size_t size)
{
    hilat_rx_t r;
    int hello = 0;
    int last_valid = 0; /* the last command answered since HELLO: its seq, CRC and reply */
    uint16_t last_seq = 0;
    uint32_t last_crc = 0;
    size_t last_index = 0;
    hilat_rx_init(&r);
    n_expected = 0;
    for (size_t i = 0; i < size; i++) {
        size_t n = hilat_rx_feed(&r, data[i]);
        if (!n)
            continue;
        hilat_command_t cmd;
        memset(&cmd, 0, sizeof cmd);
        int err = hilat_parse_command(r.buf, n, &cmd);
        if (err == HILAT_OK && cmd.type == HILAT_MSG_HELLO) {
            hello = 1;
            last_valid = 0;
            expect(R_IDENTIFY, &cmd);
            continue;
        } else if (err == HILAT_ERR_VERSION && cmd.type == HILAT_MSG_HELLO) {
            last_valid = 0;
            expect(R_ACK_VERSION, &cmd); /* with or without a session */
            continue;
        } else if (!hello || HILAT_IS_CORRUPT(err)) {
            continue;
        } else if (last_valid && cmd.seq == last_seq && cmd.crc == last_crc) {
            expect(R_REPEAT, &cmd);
            expected[n_expected - 1].repeats = last_index;
            continue;
        } else if (err != HILAT_OK) {
            expect(R_ACK_REFUSED, &cmd);
        } else if (cmd.type == HILAT_MSG_TIME_REQ) {
            expect(R_TIME, &cmd);
        } else if (cmd.type == HILAT_MSG_STATUS_REQ) {
            expect(R_STATUS, &cmd);
        } else if (!HAS_ENGINE && (cmd.type == HILAT_MSG_ENGINE_CONFIG || cmd.type == HILAT_MSG_ENGINE_FLUSH
                                   || cmd.type == HILAT_MSG_ENGINE_STATS_REQ)) {
            expect(R_NO_ENGINE, &cmd);
        } else if (cmd.type == HILAT_MSG_ENGINE_STATS_REQ) {
            expect(R_ENGINE_STATS, &cmd);
        } else if (!HAS_ETHERNET && is_ethernet_command(cmd.type)) {
            expect(R_NO_ETHERNET, &cmd);
        } else {
            expect(R_ACK, &cmd);
        }
        last_valid = 1;
        last_seq = cmd.seq;
        last_crc = cmd.crc;
        last_index = n_expected - 1;
    }
}

/* ---- checking what the rig sent ---- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }

/* At the end of the input a stimulus channel's registers hold the last STIM_CONFIG acknowledged
 * with code 0 for it (HELLO does not clear them), or nothing (reset) when none was: a refused
 * configuration writes nothing. */
static void check_stim_registers(unsigned ch, const hilat_stim_config_t *c)
{
    static const hilat_stim_config_t reset;
    if (!c)
        c = &reset;
    CHECK(csr_read_simple(STIM_REG(ch, WIDTH)) == c->width);
    CHECK(csr_read_simple(STIM_REG(ch, PERIOD)) == c->period);
    CHECK(csr_read_simple(STIM_REG(ch, JITTER)) == c->jitter);
    CHECK(csr_read_simple(STIM_REG(ch, PROBABILITY)) == c->probability);
    CHECK(csr_read_simple(STIM_REG(ch, BURST_COUNT)) == c->burst_count);
    CHECK(csr_read_simple(STIM_REG(ch, BURST_SPACING)) == c->burst_spacing);
    CHECK(csr_read_simple(STIM_REG(ch, COUNT)) == c->count);
    CHECK(csr_read_simple(STIM_REG(ch, SEED)) == c->seed);
}

/* The capture registers hold the last CAPTURE_CONFIG acknowledged since the last HELLO (which
 * disables every channel), with the glitch filter clamped to 15 ticks; all 0 when none was. */
static void check_capture_registers(const hilat_capture_config_t *c)
{
    for (unsigned ch = 0; ch < N_CHANNELS; ch++) {
        uint32_t want = 0;
        if (c) {
            uint8_t flags = c->flags[ch];
            CHECK(c->n == N_CHANNELS);
            want = FIELD(CAPTURE_CH0_CONFIG, ENABLE, (flags & HILAT_CAPTURE_ENABLE) != 0)
                   | FIELD(CAPTURE_CH0_CONFIG, RISE, (flags & HILAT_CAPTURE_RISE) != 0)
                   | FIELD(CAPTURE_CH0_CONFIG, FALL, (flags & HILAT_CAPTURE_FALL) != 0)
                   | FIELD(CAPTURE_CH0_CONFIG, GLITCH, c->glitch[ch] > HILAT_GLITCH_MAX ? HILAT_GLITCH_MAX
                                                                                     : c->glitch[ch]);
        }
        CHECK(csr_read_simple(CAPTURE_CONFIG_REG(ch)) == want);
    }
}

static void check_output(void)
{
    uint8_t dec[HILAT_MAX_DECODED];
    size_t start = 0, k = 0, n;
    int seq = -1;
    /* The last accepted configuration of each stimulus channel and of the capture, if any. */
    const hilat_command_t *last_stim[HILAT_N_STIMULUS] = {0}, *last_capture = 0;

    for (size_t i = 0; i < tx_len; i++) {
        if (tx[i] != 0)
            continue;
        CHECK(i > start && i - start <= HILAT_MAX_ENCODED);
        CHECK(hilat_cobs_decode(tx + start, i - start, dec, sizeof dec, &n) == HILAT_OK);
        CHECK(n >= HILAT_MIN_FRAME && hilat_crc32(dec, n - 4) == le32(dec + n - 4));
        CHECK(dec[0] == HILAT_PROTOCOL_VERSION && dec[1] < 0x80u);
        uint8_t type = dec[1];
        uint16_t frame_seq = le16(dec + 2);
        const uint8_t *body = dec + HILAT_HEADER_SIZE;
        size_t frame_start = start;
        start = i + 1;
        if (type == HILAT_MSG_EVENTS || type == HILAT_MSG_OVERFLOW)
            CHECK(0); /* the fake capture FIFO is empty */
        if (type == HILAT_MSG_ENGINE_BINS || type == HILAT_MSG_ENGINE_OUTLIERS) {
            CHECK(HAS_ENGINE && seq >= 0 && frame_seq == (uint16_t)(seq + 1)); /* in a session, no reply */
            seq = frame_seq;
            continue;
        }
        CHECK(k < n_expected);
        reply_at[k] = frame_start;
        reply_len[k] = start - frame_start;
        const expected_t *e = &expected[k++];
        if (e->kind == R_REPEAT) { /* the earlier reply again, byte for byte; the sequence stays */
            CHECK(reply_len[k - 1] == reply_len[e->repeats]
                  && memcmp(tx + frame_start, tx + reply_at[e->repeats], reply_len[e->repeats]) == 0);
            continue;
        }
        if (type == HILAT_MSG_IDENTIFY) {
            CHECK(e->kind == R_IDENTIFY && frame_seq == 0);
            CHECK(body[0] == HILAT_PROTOCOL_VERSION && body[9] == HILAT_N_STIMULUS && body[10] == HILAT_N_INPUTS);
            /* The table, then uart_baud and the ethernet byte (and its 17-byte tail on an Ethernet rig). */
            CHECK(le32(body + 14) & HILAT_CAP_ETHERNET ? HAS_ETHERNET : !HAS_ETHERNET);
            CHECK(dec[n - 4 - 1 - (HAS_ETHERNET ? 17 : 0)] == (HAS_ETHERNET ? 1 : 0));
            seq = 0;
            last_capture = 0;
            continue;
        }
        CHECK(frame_seq == (uint16_t)(seq + 1)); /* seq -1: nothing sent since the reset */
        seq = frame_seq;
        switch (type) {
        case HILAT_MSG_ACK:
            CHECK(e->kind == R_ACK || e->kind == R_ACK_REFUSED || e->kind == R_ACK_VERSION || e->kind == R_NO_ENGINE
                  || e->kind == R_NO_ETHERNET);
            CHECK(le16(body) == e->command_seq);
            if (e->kind == R_NO_ETHERNET) {
                CHECK(body[2] == HILAT_ACK_REFUSED);
            } else if (e->kind == R_NO_ENGINE) {
                CHECK(body[2] == HILAT_ACK_REFUSED || body[2] == HILAT_ACK_MALFORMED);
            } else if (e->kind == R_ACK_VERSION) {
                CHECK(body[2] == HILAT_ACK_VERSION);
            } else if (e->kind == R_ACK_REFUSED) {
                CHECK(body[2] == HILAT_ACK_MALFORMED);
            } else if (body[2] == HILAT_ACK_OK && e->cmd.type == HILAT_MSG_STIM_CONFIG) {
                last_stim[e->cmd.u.stim_config.channel] = &e->cmd;
            } else if (body[2] == HILAT_ACK_OK && e->cmd.type == HILAT_MSG_CAPTURE_CONFIG) {
                last_capture = &e->cmd;
            }
            if (e->kind == R_ACK && body[2] != HILAT_ACK_OK) /* a well-formed STOP is never refused */
                CHECK(e->cmd.type != HILAT_MSG_STOP && (body[2] == HILAT_ACK_REFUSED || body[2] == HILAT_ACK_LATE));
            if (e->kind == R_ACK && (e->cmd.type == HILAT_MSG_ENGINE_CONFIG || e->cmd.type == HILAT_MSG_ENGINE_FLUSH))
                CHECK(body[2] == HILAT_ACK_OK || body[2] == HILAT_ACK_REFUSED);
            break;
        case HILAT_MSG_ENGINE_STATS:
            CHECK(e->kind == R_ENGINE_STATS && le16(body) == e->command_seq);
            CHECK(n == HILAT_HEADER_SIZE + 244u + HILAT_CRC_SIZE);
            break;
        case HILAT_MSG_TIME:
            CHECK(e->kind == R_TIME && le16(body) == e->command_seq);
            break;
        case HILAT_MSG_STATUS: {
            CHECK(e->kind == R_STATUS && body[13] == N_CHANNELS);
            /* Counters, the drop counts, the stimulus channels' status bytes, then their pulse counts. */
            const uint8_t *stim = body + 14 + 4 * N_CHANNELS;
            CHECK(stim[0] == HILAT_N_STIMULUS);
            CHECK(n == HILAT_HEADER_SIZE + 14 + 4 * N_CHANNELS + 1 + 5 * HILAT_N_STIMULUS + HILAT_CRC_SIZE);
            for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
                CHECK(le32(stim + 1 + HILAT_N_STIMULUS + 4 * ch) == FAKE_FIRED(ch));
            break;
        }
        default:
            CHECK(0);
        }
    }
    CHECK(start == tx_len && k == n_expected); /* every frame complete, every reply sent */
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        check_stim_registers(ch, last_stim[ch] ? &last_stim[ch]->u.stim_config : 0);
    check_capture_registers(last_capture ? &last_capture->u.capture_config : 0);
}

/* ---- the firmware's state between inputs: as after a reset ---- */

static void reset_firmware(void)
{
    memset(regs, 0, sizeof regs);
    rx_head = rx_tail = 0;
    rx_ring_overflow = 0;
    session = 0;
    tx_seq = 0;
    records_sent = events_sent = frames_sent = 0;
    events_open = 0;
    idle_loops = 0;
    memset(stim_mode, 0, sizeof stim_mode);
    memset(stim_invert, 0, sizeof stim_invert);
    memset(fired_asked, 0, sizeof fired_asked);
    tx_len = 0;
    fake_ticks = 1u << 20;
    init();
}

/* Input: a mode byte, then either the bytes the UART receives (mode bit 0 clear) or commands as
 * length-prefixed payloads (header + body) that are sent correctly framed, with CRC and COBS (mode
 * bit 0 set): mutations seldom keep a CRC valid, so raw bytes alone would hardly reach a handler. */
static uint8_t *uart_bytes(const uint8_t *data, size_t size, size_t *len)
{
    uint8_t *out;
    if (size == 0 || !(data[0] & 1)) {
        *len = size ? size - 1 : 0;
        out = malloc(*len ? *len : 1);
        if (out && *len)
            memcpy(out, data + 1, *len);
        return out;
    }
    out = malloc(7 * size + 16); /* per payload: 1 input byte of length -> at most 7 on the wire */
    if (!out)
        return 0;
    *len = 0;
    for (size_t i = 1; i < size;) {
        size_t n = data[i++];
        if (n > size - i)
            n = size - i;
        if (n > HILAT_MAX_PAYLOAD)
            n = HILAT_MAX_PAYLOAD;
        uint8_t frame[HILAT_MAX_DECODED];
        memcpy(frame, data + i, n);
        i += n;
        uint32_t crc = hilat_crc32(frame, n);
        for (unsigned b = 0; b < 4; b++)
            frame[n + b] = (uint8_t)(crc >> (8 * b));
        size_t w = hilat_cobs_encode(frame, n + 4, out + *len, HILAT_MAX_ENCODED);
        CHECK(w > 0);
        *len += w;
        out[(*len)++] = 0;
    }
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t len;
    uint8_t *copy = uart_bytes(data, size, &len);
    if (!copy)
        return 0;
    size = len;
    reset_firmware();
    tx_len = 0; /* init() sends nothing, but writes registers */
    rx_data = copy;
    rx_len = size;
    rx_pos = 0;
    while (rx_pos < rx_len || rx_tail != rx_head) {
        rx_budget = 64;
        service();
    }
    CHECK(rx_ring_overflow == 0);
    work_out_replies(copy, size);
    check_output();
    free(copy);
    return 0;
}
