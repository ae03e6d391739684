/*
 * libFuzzer target for the whole command path of the rig firmware: firmware/main.c (UART receive
 * ring, frame handling, every command handler) on a fake CSR bus, built against the simulated SoC's
 * generated csr.h / soc.h, under ASan + UBSan. LiteX lets a program supply its own CSR accessors
 * (CSR_ACCESSORS_DEFINED); these bounds-check every access and play the UART, the timebase, an
 * empty capture FIFO and, on a SoC with Ethernet (csr.h of tests/firmware/eth_headers.py), the UDP
 * command bridge and the stream's registers. Commands arrive as "deliveries" in input order: bytes
 * on the UART, or one UDP datagram from a source address; the next is offered only when the firmware
 * has read the previous one, so the order in which it handles frames is the input's.
 *
 * Oracles:
 *  - every CSR access is aligned and inside the SoC's CSR space; no UART byte is read that the host
 *    did not send;
 *  - what the rig sends is a sequence of valid rig->host frames (COBS, CRC, version, type), with
 *    seq 0 at each IDENTIFY and consecutive after it; over UDP one frame per datagram;
 *  - each reply goes to the link its command came from (a UDP reply to the datagram's source address
 *    and port), the engine's own frames to the link of the last HELLO;
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
 *    (no CSR_ETHSTREAM_BASE) are refused with ACK code 1, and IDENTIFY says ethernet 0. With it:
 *    STREAM_CONFIG is refused exactly when flush_us is 0 or, over the UART, a destination is 0; the
 *    stream's registers hold the last one acknowledged (destination 0 resolved to the command
 *    datagram's source, flush and heartbeat in sys cycles, enable cleared by HELLO); each START
 *    acknowledged restarts the stream after writing the session of the last STREAM_CONFIG since
 *    HELLO; STREAM_STATUS gives those settings and the counters' registers; NET_CONFIG is refused
 *    exactly for address 0 or a multicast MAC, writes the address registers only after its ACK
 *    has been sent, and IDENTIFY's tail carries the address registers' values, the soc.h ports and
 *    the datagram format;
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
static uint64_t fake_ticks;

/* What the host sends: deliveries of bytes, on the UART or as one UDP datagram each. */
#define MAX_DELIVERIES 4096u
typedef struct {
    link_t from;
    size_t start, len; /* in in_bytes */
} delivery_t;
static uint8_t *in_bytes;
static delivery_t deliveries[MAX_DELIVERIES];
static size_t n_deliveries, cur, cur_pos, rx_budget;

/* The delivery being read, if it is on this link (udp 0 or 1) and has bytes left. */
static const delivery_t *offered(int udp)
{
    if (cur >= n_deliveries || deliveries[cur].from.udp != udp)
        return 0;
    return &deliveries[cur];
}

static uint8_t take_byte(void)
{
    uint8_t b = in_bytes[deliveries[cur].start + cur_pos++];
    if (cur_pos == deliveries[cur].len) {
        cur++;
        cur_pos = 0;
    }
    return b;
}

/* What the rig sends: every frame in order with where it went. UART bytes are cut at 0x00; a UDP
 * datagram is one entry. */
#define MAX_SENT 8192u
typedef struct {
    link_t to;
    size_t start, len; /* in tx, delimiter included */
} sent_t;
static uint8_t tx[1u << 20];
static size_t tx_len, uart_frame_start;
static sent_t sent[MAX_SENT];
static size_t n_sent;
static size_t udp_out_len; /* bytes of the datagram being appended (udp_out) */
#if HAS_ETHERNET
static uint8_t udp_out[HILAT_MAX_WIRE + 1];
#endif

static void log_sent(link_t to, size_t start)
{
    CHECK(n_sent < MAX_SENT);
    sent[n_sent].to = to;
    sent[n_sent].start = start;
    sent[n_sent].len = tx_len - start;
    n_sent++;
}

/* The stimulus channels' pulse counts: a snapshot asked (fired_control.snapshot written) and not
 * yet read. */
static int fired_asked[HILAT_N_STIMULUS];
#define FAKE_FIRED(ch) (0xF1000000u + 0x10101u * (uint32_t)(ch))

#if HAS_ETHERNET
/* The counters' fake values (STREAM_STATUS must carry them). */
#define FAKE_DATAGRAMS 0x01020304u
#define FAKE_RECORDS 0x0000000A0B0C0D0Eull
/* Ethernet frames received: the datagrams the firmware has begun to read (0 until the first: the
 * link is down for STREAM_STATUS over the UART before any); each value read is kept, in order. */
static uint32_t rx_frames_read[MAX_DELIVERIES];
static size_t n_rx_frames_read;
#define FAKE_CMD_DROPPED 5u
/* The session register at each restart of the stream. */
static uint32_t restart_sessions[MAX_DELIVERIES];
static size_t n_restarts;
#endif

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
        if ((uint8_t)v == 0) {
            log_sent(uart_link, uart_frame_start);
            uart_frame_start = tx_len;
        }
        return;
    }
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        if (a == STIM_REG(ch, FIRED_CONTROL) && GET(STIMULUS_CH0_FIRED_CONTROL, SNAPSHOT, v))
            fired_asked[ch] = 1;
#if HAS_ETHERNET
    if (a == CSR_ETHCMD_RX_POP_ADDR && GET(ETHCMD_RX_POP, POP, v)) {
        CHECK(offered(1)); /* the bridge pops nothing from an empty buffer, but the firmware must know */
        take_byte();
        return;
    }
    if (a == CSR_ETHCMD_TX_DATA_ADDR) {
        CHECK(udp_out_len < sizeof udp_out); /* a frame, never more */
        udp_out[udp_out_len++] = (uint8_t)v;
        return;
    }
    if (a == CSR_ETHCMD_TX_SEND_ADDR && GET(ETHCMD_TX_SEND, SEND, v)) {
        /* One frame, with its delimiter and no other 0x00. */
        CHECK(udp_out_len >= 2 && udp_out[udp_out_len - 1] == 0 && !memchr(udp_out, 0, udp_out_len - 1));
        CHECK(tx_len + udp_out_len <= sizeof tx && uart_frame_start == tx_len);
        link_t to = {1, *reg(CSR_ETHCMD_TX_DST_IP_ADDR), (uint16_t)*reg(CSR_ETHCMD_TX_DST_PORT_ADDR)};
        size_t start = tx_len;
        memcpy(tx + tx_len, udp_out, udp_out_len);
        tx_len += udp_out_len;
        uart_frame_start = tx_len;
        udp_out_len = 0;
        log_sent(to, start);
        return;
    }
    if (a == CSR_ETHSTREAM_CONTROL_ADDR && GET(ETHSTREAM_CONTROL, RESTART, v)) {
        CHECK(n_restarts < MAX_DELIVERIES);
        restart_sessions[n_restarts++] = *reg(CSR_ETHSTREAM_SESSION_ADDR);
    }
    if (a == CSR_ETHNET_IP_ADDR || a == CSR_ETHNET_MAC_ADDR || a == CSR_ETHNET_MAC_ADDR + 4) {
        /* A new address only after the NET_CONFIG's ACK (done) has been sent. */
        uint8_t dec[HILAT_MAX_DECODED];
        size_t n;
        CHECK(n_sent > 0);
        const sent_t *last = &sent[n_sent - 1];
        CHECK(hilat_cobs_decode(tx + last->start, last->len - 1, dec, sizeof dec, &n) == HILAT_OK);
        CHECK(dec[1] == HILAT_MSG_ACK && dec[HILAT_HEADER_SIZE + 2] == HILAT_ACK_OK);
    }
#endif
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
        return !offered(0) || rx_budget == 0; /* a few bytes per pass: the ring never fills */
    if (a == CSR_UART_RXTX_ADDR) {
        CHECK(offered(0) && rx_budget > 0);
        rx_budget--;
        return take_byte();
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
#if HAS_ETHERNET
    const delivery_t *d = offered(1);
    if (a == CSR_ETHCMD_RX_STATUS_ADDR)
        return d ? FIELD(ETHCMD_RX_STATUS, PENDING, 1) | FIELD(ETHCMD_RX_STATUS, LAST, cur_pos + 1 == d->len) : 0;
    if (a == CSR_ETHCMD_RX_DATA_ADDR || a == CSR_ETHCMD_RX_SRC_IP_ADDR || a == CSR_ETHCMD_RX_SRC_PORT_ADDR) {
        CHECK(d); /* a datagram's registers read while none is there */
        return a == CSR_ETHCMD_RX_DATA_ADDR ? in_bytes[d->start + cur_pos]
               : a == CSR_ETHCMD_RX_SRC_IP_ADDR ? d->from.ip : d->from.port;
    }
    if (a == CSR_ETHCMD_TX_STATUS_ADDR)
        return FIELD(ETHCMD_TX_STATUS, READY, 1);
    if (a == CSR_ETHCMD_RX_DROPPED_ADDR)
        return FAKE_CMD_DROPPED;
    if (a == CSR_ETHSTREAM_DATAGRAMS_ADDR)
        return FAKE_DATAGRAMS;
    if (a == CSR_ETHSTREAM_RECORDS_ADDR)
        return (uint32_t)(FAKE_RECORDS >> 32);
    if (a == CSR_ETHSTREAM_RECORDS_ADDR + 4)
        return (uint32_t)FAKE_RECORDS;
    if (a == CSR_ETHNET_STATUS_ADDR)
    {
        uint32_t frames = 0;
        for (size_t k = 0; k < cur + (cur < n_deliveries && cur_pos > 0); k++)
            frames += deliveries[k].from.udp;
        CHECK(n_rx_frames_read < MAX_DELIVERIES);
        rx_frames_read[n_rx_frames_read++] = frames;
        return FIELD(ETHNET_STATUS, RX_FRAMES, frames);
    }
#endif
    return *r;
}

/* ---- expected replies, from the input alone ---- */

enum { R_IDENTIFY, R_ACK, R_ACK_REFUSED, R_ACK_VERSION, R_TIME, R_STATUS, R_ENGINE_STATS, R_NO_ENGINE,
       R_NO_ETHERNET, R_REPEAT, R_STREAM_STATUS };
typedef struct {
    uint8_t kind;
    uint16_t command_seq;
    link_t from;         /* where the command came from: the reply goes there */
    size_t repeats;      /* R_REPEAT: the index of the reply it repeats */
    hilat_command_t cmd; /* R_ACK: the command, for the register check */
} expected_t;

#define MAX_EXPECTED 4096u
static expected_t expected[MAX_EXPECTED];
static size_t n_expected;
/* Where each expected reply was found in tx (start, length with the delimiter). */
static size_t reply_at[MAX_EXPECTED], reply_len[MAX_EXPECTED];

static void expect(uint8_t kind, const hilat_command_t *cmd, const link_t *from)
{
    CHECK(n_expected < MAX_EXPECTED);
    expected[n_expected].kind = kind;
    expected[n_expected].command_seq = cmd->seq;
    expected[n_expected].from = *from;
    expected[n_expected].cmd = *cmd;
    n_expected++;
}

static int is_ethernet_command(uint8_t type)
{
    return type == HILAT_MSG_STREAM_CONFIG || type == HILAT_MSG_STREAM_STATUS_REQ || type == HILAT_MSG_NET_CONFIG;
}

/* The replies the deliveries ask for, in order: the UART's frames through one receiver, each
 * datagram's through another that the datagram's end closes (as if a 0x00 ended it). */
static void work_out_replies(void)
{
    hilat_rx_t uart_rx, udp_rx;
    int hello = 0;
    int last_valid = 0; /* the last command answered since HELLO: its seq, CRC and reply */
    uint16_t last_seq = 0;
    uint32_t last_crc = 0;
    size_t last_index = 0;
    hilat_rx_init(&uart_rx);
    hilat_rx_init(&udp_rx);
    n_expected = 0;
    for (size_t d = 0; d < n_deliveries; d++) {
        const delivery_t *dv = &deliveries[d];
        hilat_rx_t *r = dv->from.udp ? &udp_rx : &uart_rx;
        for (size_t i = 0; i <= dv->len; i++) {
            size_t n;
            if (i < dv->len)
                n = hilat_rx_feed(r, in_bytes[dv->start + i]);
            else if (dv->from.udp && in_bytes[dv->start + dv->len - 1] != 0)
                n = hilat_rx_feed(r, 0);
            else
                break;
            if (!n)
                continue;
            hilat_command_t cmd;
            memset(&cmd, 0, sizeof cmd);
            int err = hilat_parse_command(r->buf, n, &cmd);
            if (err == HILAT_OK && cmd.type == HILAT_MSG_HELLO) {
                hello = 1;
                last_valid = 0;
                expect(R_IDENTIFY, &cmd, &dv->from);
                continue;
            } else if (err == HILAT_ERR_VERSION && cmd.type == HILAT_MSG_HELLO) {
                last_valid = 0;
                expect(R_ACK_VERSION, &cmd, &dv->from); /* with or without a session */
                continue;
            } else if (!hello || HILAT_IS_CORRUPT(err)) {
                continue;
            } else if (last_valid && cmd.seq == last_seq && cmd.crc == last_crc) {
                expect(R_REPEAT, &cmd, &dv->from);
                expected[n_expected - 1].repeats = last_index;
                continue;
            } else if (err != HILAT_OK) {
                expect(R_ACK_REFUSED, &cmd, &dv->from);
            } else if (cmd.type == HILAT_MSG_TIME_REQ) {
                expect(R_TIME, &cmd, &dv->from);
            } else if (cmd.type == HILAT_MSG_STATUS_REQ) {
                expect(R_STATUS, &cmd, &dv->from);
            } else if (!HAS_ENGINE && (cmd.type == HILAT_MSG_ENGINE_CONFIG || cmd.type == HILAT_MSG_ENGINE_FLUSH
                                       || cmd.type == HILAT_MSG_ENGINE_STATS_REQ)) {
                expect(R_NO_ENGINE, &cmd, &dv->from);
            } else if (cmd.type == HILAT_MSG_ENGINE_STATS_REQ) {
                expect(R_ENGINE_STATS, &cmd, &dv->from);
            } else if (!HAS_ETHERNET && is_ethernet_command(cmd.type)) {
                expect(R_NO_ETHERNET, &cmd, &dv->from);
            } else if (cmd.type == HILAT_MSG_STREAM_STATUS_REQ) {
                expect(R_STREAM_STATUS, &cmd, &dv->from);
            } else {
                expect(R_ACK, &cmd, &dv->from);
            }
            last_valid = 1;
            last_seq = cmd.seq;
            last_crc = cmd.crc;
            last_index = n_expected - 1;
        }
    }
}

/* ---- checking what the rig sent ---- */

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)le16(p) | (uint32_t)le16(p + 2) << 16; }

static int same_link(const link_t *a, const link_t *b)
{
    return a->udp == b->udp && (!a->udp || (a->ip == b->ip && a->port == b->port));
}

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

#if HAS_ETHERNET
#define MAC_DEFAULT ((uint64_t)HILAT_ETH_MAC_DEFAULT)
/* The Ethernet state the replies must show, worked out along them: the stream's settings since
 * HELLO, the registers' expected values, the rig's address. */
static hilat_stream_status_t o_stream;
static uint32_t o_dst_ip, o_dst_port, o_flush, o_heartbeat, o_session, o_ip;
static uint64_t o_mac;
static size_t o_restarts, o_rx_frames_reads;

static void oracle_ethernet_reset(void)
{
    memset(&o_stream, 0, sizeof o_stream);
    o_stream.flush_us = 100;
    o_stream.heartbeat_ms = 100;
}

static uint32_t cycles(uint32_t amount, uint32_t per_second)
{
    uint64_t c = (uint64_t)amount * CONFIG_CLOCK_FREQUENCY / per_second;
    return c > 0xFFFFFFFFu ? 0xFFFFFFFFu : (uint32_t)c;
}

/* An ACK to an Ethernet command or to START: its code, and the state it changes. */
static void oracle_ethernet_ack(const expected_t *e, uint8_t code)
{
    const hilat_command_t *c = &e->cmd;
    if (c->type == HILAT_MSG_STREAM_CONFIG) {
        const hilat_stream_config_t *s = &c->u.stream_config;
        int refused = s->flush_us == 0 || (!e->from.udp && (s->dst_ip == 0 || s->dst_port == 0));
        CHECK(code == (refused ? HILAT_ACK_REFUSED : HILAT_ACK_OK));
        if (refused)
            return;
        o_stream.enabled = s->enable ? 1 : 0;
        o_stream.session = o_session = s->session;
        o_stream.dst_ip = o_dst_ip = s->dst_ip ? s->dst_ip : e->from.ip;
        o_stream.dst_port = (uint16_t)(o_dst_port = s->dst_port ? s->dst_port : e->from.port);
        o_stream.flush_us = s->flush_us;
        o_stream.heartbeat_ms = s->heartbeat_ms;
        o_flush = cycles(s->flush_us, 1000000u);
        o_heartbeat = cycles(s->heartbeat_ms, 1000u);
    } else if (c->type == HILAT_MSG_NET_CONFIG) {
        int refused = c->u.net_config.ip == 0 || (c->u.net_config.mac[0] & 1u);
        CHECK(code == (refused ? HILAT_ACK_REFUSED : HILAT_ACK_OK));
        if (refused)
            return;
        o_ip = c->u.net_config.ip;
        o_mac = 0;
        for (unsigned i = 0; i < HILAT_MAC_BYTES; i++)
            o_mac = o_mac << 8 | c->u.net_config.mac[i];
    } else if (c->type == HILAT_MSG_START && code == HILAT_ACK_OK) {
        /* The restart, after the session of the last STREAM_CONFIG since HELLO was written. */
        CHECK(o_restarts < n_restarts && restart_sessions[o_restarts] == o_stream.session);
        o_restarts++;
        o_session = o_stream.session;
    }
}

/* IDENTIFY's tail: ethernet 1, the address registers' values, the ports and the datagram format. */
static void oracle_ethernet_identify(const uint8_t *tail)
{
    uint64_t mac = 0;
    for (unsigned i = 0; i < HILAT_MAC_BYTES; i++)
        mac = mac << 8 | tail[5 + i];
    CHECK(tail[0] == 1 && le32(tail + 1) == o_ip && mac == o_mac);
    CHECK(le16(tail + 11) == HILAT_ETH_COMMAND_PORT && le16(tail + 13) == HILAT_ETH_STREAM_PORT);
    CHECK(tail[15] == HILAT_ETH_RECORD_WORDS && le16(tail + 16) == HILAT_ETH_MAX_RECORDS);
    oracle_ethernet_reset(); /* HELLO: the stream off, its settings the defaults */
}

static void oracle_stream_status(const uint8_t *b)
{
    const hilat_stream_status_t *o = &o_stream;
    /* rx_frames: the value the firmware read for this STREAM_STATUS; link bit0 says whether it is 0. */
    CHECK(o_rx_frames_reads < n_rx_frames_read);
    uint32_t frames = rx_frames_read[o_rx_frames_reads++];
    CHECK(b[2] == o->enabled && b[3] == (frames ? HILAT_STREAM_LINK_UP : 0u) && le32(b + 4) == o->session);
    CHECK(le32(b + 8) == o->dst_ip && le16(b + 12) == o->dst_port && le16(b + 14) == o->flush_us);
    CHECK(le16(b + 16) == o->heartbeat_ms && le32(b + 18) == FAKE_DATAGRAMS);
    CHECK(le32(b + 22) == (uint32_t)FAKE_RECORDS && le32(b + 26) == (uint32_t)(FAKE_RECORDS >> 32));
    CHECK(le32(b + 30) == frames && le32(b + 34) == FAKE_CMD_DROPPED);
}

static void check_ethernet_registers(void)
{
    CHECK(csr_read_simple(CSR_ETHSTREAM_DST_IP_ADDR) == o_dst_ip);
    CHECK(csr_read_simple(CSR_ETHSTREAM_DST_PORT_ADDR) == o_dst_port);
    CHECK(csr_read_simple(CSR_ETHSTREAM_FLUSH_CYCLES_ADDR) == o_flush);
    CHECK(csr_read_simple(CSR_ETHSTREAM_HEARTBEAT_CYCLES_ADDR) == o_heartbeat);
    CHECK(csr_read_simple(CSR_ETHSTREAM_SESSION_ADDR) == o_session);
    CHECK(GET(ETHSTREAM_CONTROL, ENABLE, csr_read_simple(CSR_ETHSTREAM_CONTROL_ADDR)) == o_stream.enabled);
    CHECK(o_restarts == n_restarts); /* no restart but at an acknowledged START */
    CHECK(o_rx_frames_reads == n_rx_frames_read); /* read for STREAM_STATUS only */
    CHECK(ethnet_ip_read() == o_ip && ethnet_mac_read() == o_mac);
}
#endif

static void check_output(void)
{
    uint8_t dec[HILAT_MAX_DECODED];
    size_t k = 0, n;
    int seq = -1;
    link_t session_link = uart_link; /* the link of the last HELLO */
    /* The last accepted configuration of each stimulus channel and of the capture, if any. */
    const hilat_command_t *last_stim[HILAT_N_STIMULUS] = {0}, *last_capture = 0;
#if HAS_ETHERNET
    oracle_ethernet_reset();
    o_dst_ip = o_dst_port = o_flush = o_heartbeat = o_session = 0;
    o_ip = HILAT_ETH_IP_DEFAULT;
    o_mac = MAC_DEFAULT;
    o_restarts = o_rx_frames_reads = 0;
#endif

    CHECK(uart_frame_start == tx_len && udp_out_len == 0); /* every frame complete */
    for (size_t f = 0; f < n_sent; f++) {
        const sent_t *out_frame = &sent[f];
        CHECK(out_frame->len >= 2 && out_frame->len - 1 <= HILAT_MAX_ENCODED);
        CHECK(hilat_cobs_decode(tx + out_frame->start, out_frame->len - 1, dec, sizeof dec, &n) == HILAT_OK);
        CHECK(n >= HILAT_MIN_FRAME && hilat_crc32(dec, n - 4) == le32(dec + n - 4));
        CHECK(dec[0] == HILAT_PROTOCOL_VERSION && dec[1] < 0x80u);
        uint8_t type = dec[1];
        uint16_t frame_seq = le16(dec + 2);
        const uint8_t *body = dec + HILAT_HEADER_SIZE;
        if (type == HILAT_MSG_EVENTS || type == HILAT_MSG_OVERFLOW)
            CHECK(0); /* the fake capture FIFO is empty */
        if (type == HILAT_MSG_ENGINE_BINS || type == HILAT_MSG_ENGINE_OUTLIERS) {
            CHECK(HAS_ENGINE && seq >= 0 && frame_seq == (uint16_t)(seq + 1)); /* in a session, no reply */
            CHECK(same_link(&out_frame->to, &session_link));
            seq = frame_seq;
            continue;
        }
        CHECK(k < n_expected);
        reply_at[k] = out_frame->start;
        reply_len[k] = out_frame->len;
        const expected_t *e = &expected[k++];
        CHECK(same_link(&out_frame->to, &e->from)); /* a reply goes where its command came from */
        if (e->kind == R_REPEAT) { /* the earlier reply again, byte for byte; the sequence stays */
            CHECK(out_frame->len == reply_len[e->repeats]
                  && memcmp(tx + out_frame->start, tx + reply_at[e->repeats], out_frame->len) == 0);
            continue;
        }
        if (type == HILAT_MSG_IDENTIFY) {
            CHECK(e->kind == R_IDENTIFY && frame_seq == 0);
            CHECK(body[0] == HILAT_PROTOCOL_VERSION && body[9] == HILAT_N_STIMULUS && body[10] == HILAT_N_INPUTS);
            /* The table, then uart_baud and the ethernet byte (and its 17-byte tail on an Ethernet rig),
             * then tdc_inputs:u8 tdc_taps:u16 (soc.h's, 0 without a TDC). */
            CHECK(le32(body + 14) & HILAT_CAP_ETHERNET ? HAS_ETHERNET : !HAS_ETHERNET);
            const uint8_t *tdc = dec + n - 4 - 3;
            CHECK(tdc[0] == HILAT_TDC_INPUTS && le16(tdc + 1) == HILAT_TDC_TAPS);
            const uint8_t *tail = tdc - 1 - (HAS_ETHERNET ? 17 : 0);
            CHECK(tail[0] == (HAS_ETHERNET ? 1 : 0));
#if HAS_ETHERNET
            oracle_ethernet_identify(tail);
#endif
            session_link = e->from;
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
#if HAS_ETHERNET
            if (e->kind == R_ACK)
                oracle_ethernet_ack(e, body[2]);
#endif
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
#if HAS_ETHERNET
        case HILAT_MSG_STREAM_STATUS:
            CHECK(e->kind == R_STREAM_STATUS && le16(body) == e->command_seq);
            CHECK(n == HILAT_HEADER_SIZE + 38u + HILAT_CRC_SIZE);
            oracle_stream_status(body);
            break;
#endif
        default:
            CHECK(0);
        }
    }
    CHECK(k == n_expected); /* every reply sent */
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        check_stim_registers(ch, last_stim[ch] ? &last_stim[ch]->u.stim_config : 0);
    check_capture_registers(last_capture ? &last_capture->u.capture_config : 0);
#if HAS_ETHERNET
    check_ethernet_registers();
#endif
}

/* ---- the firmware's state between inputs: as after a reset ---- */

static void reset_firmware(void)
{
    memset(regs, 0, sizeof regs);
    rx_head = rx_tail = 0;
    rx_ring_overflow = 0;
    session = 0;
    session_to = reply_to = uart_link;
    last_valid = 0;
    tx_seq = 0;
    records_sent = events_sent = frames_sent = 0;
    events_open = 0;
    idle_loops = 0;
    memset(stim_mode, 0, sizeof stim_mode);
    memset(stim_invert, 0, sizeof stim_invert);
    memset(fired_asked, 0, sizeof fired_asked);
    tx_len = uart_frame_start = n_sent = udp_out_len = 0;
    fake_ticks = 1u << 20;
#if HAS_ETHERNET
    /* The address registers' reset values are the build's. */
    *reg(CSR_ETHNET_IP_ADDR) = HILAT_ETH_IP_DEFAULT;
    *reg(CSR_ETHNET_MAC_ADDR) = (uint32_t)(MAC_DEFAULT >> 32);
    *reg(CSR_ETHNET_MAC_ADDR + 4) = (uint32_t)MAC_DEFAULT;
    udp_in_datagram = 0;
    n_restarts = n_rx_frames_read = 0;
#endif
    init();
}

/* ---- the input ---- */

/* A fake host address for the k-th datagram: two hosts, two ports each. */
static link_t udp_source(size_t k)
{
    link_t l = {1, 0xC0A80164u + (uint32_t)(k & 1u), (uint16_t)(40000u + (k >> 1 & 1u))};
    return l;
}

static int add_delivery(link_t from, size_t start, size_t len)
{
    if (len == 0)
        return 1;
    if (n_deliveries >= MAX_DELIVERIES)
        return 0;
    deliveries[n_deliveries].from = from;
    deliveries[n_deliveries].start = start;
    deliveries[n_deliveries].len = len;
    n_deliveries++;
    return 1;
}

/* Input: a mode byte, then either raw bytes (mode bit 0 clear) or commands as length-prefixed
 * payloads (header + body) that are sent correctly framed, with CRC and COBS (mode bit 0 set):
 * mutations seldom keep a CRC valid, so raw bytes alone would hardly reach a handler. Raw bytes go
 * to the UART, or with mode bit 1 on an Ethernet SoC as datagrams cut after each 0x00. A payload goes
 * to the UART, or on an Ethernet SoC when bit 7 of its length byte is set (the length is then its
 * low 7 bits) as one datagram. Returns the bytes of every delivery (deliveries[] index them). */
static uint8_t *make_deliveries(const uint8_t *data, size_t size)
{
    uint8_t *out;
    n_deliveries = 0;
    if (size == 0 || !(data[0] & 1)) {
        size_t len = size ? size - 1 : 0;
        out = malloc(len ? len : 1);
        if (!out)
            return 0;
        if (len)
            memcpy(out, data + 1, len);
        if (!(HAS_ETHERNET && size && (data[0] & 2))) {
            add_delivery(uart_link, 0, len);
            return out;
        }
        for (size_t i = 0, start = 0, k = 0; i < len; i++)
            if (out[i] == 0 || i + 1 == len) {
                if (!add_delivery(udp_source(k++), start, i + 1 - start))
                    break;
                start = i + 1;
            }
        return out;
    }
    out = malloc(7 * size + 16); /* per payload: 1 input byte of length -> at most 7 on the wire */
    if (!out)
        return 0;
    size_t len = 0;
    for (size_t i = 1, k = 0; i < size; k++) {
        size_t n = data[i++];
        int udp = HAS_ETHERNET && (n & 0x80u);
        if (HAS_ETHERNET)
            n &= 0x7Fu;
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
        size_t w = hilat_cobs_encode(frame, n + 4, out + len, HILAT_MAX_ENCODED);
        CHECK(w > 0);
        out[len + w] = 0;
        if (!add_delivery(udp ? udp_source(k) : uart_link, len, w + 1))
            break;
        len += w + 1;
    }
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *copy = make_deliveries(data, size);
    if (!copy)
        return 0;
    reset_firmware();
    n_sent = tx_len = uart_frame_start = 0; /* init() sends nothing, but writes registers */
    in_bytes = copy;
    cur = cur_pos = 0;
    while (cur < n_deliveries || rx_tail != rx_head) {
        rx_budget = 64;
        service();
    }
    CHECK(rx_ring_overflow == 0);
    work_out_replies();
    check_output();
    free(copy);
    return 0;
}
