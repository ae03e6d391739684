/* hilat rig firmware: drains the capture core's records and speaks the rig protocol on the UART
 * and, on an Ethernet rig, over UDP through the gateware's command bridge (docs/ethernet.md).
 *
 * Built against the SoC's generated csr.h / soc.h (no hard-coded address or size) and baked into
 * ROM in place of the BIOS. The UART is polled; while a frame is being sent, received bytes are
 * moved into a software ring so a command arriving during a long transmission is not lost.
 *
 * Nothing is sent before the host's HELLO (see docs/protocol.md). A reply goes to the link its
 * command came from; frames the rig sends on its own go to the link of the last HELLO.
 */

#include <stdint.h>
#include <string.h>

/* soc.h's accessors return int: an Ethernet build's address constants (HILAT_ETH_IP_DEFAULT above
 * 2**31, HILAT_ETH_MAC_DEFAULT of 48 bits) overflow theirs. The firmware uses neither (it reads the
 * ethnet CSRs, which NET_CONFIG may have changed). */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Woverflow"
#ifdef __clang__
#pragma clang diagnostic ignored "-Wconstant-conversion"
#endif
#include <generated/csr.h>
#include <generated/soc.h>
#pragma GCC diagnostic pop
#include <hw/common.h>

#include "protocol.h"

#define FIRMWARE_IDENTITY "hilat-fw 4"

#define N_CHANNELS HILAT_N_CHANNELS
_Static_assert(HILAT_N_CHANNELS == HILAT_N_STIMULUS + HILAT_N_INPUTS, "channel table: stimulus then inputs");
_Static_assert(HILAT_N_CHANNELS <= HILAT_MAX_CHANNELS, "more channels than a protocol mask holds");
_Static_assert(HILAT_N_STIMULUS <= HILAT_MAX_STIMULUS, "more stimulus channels than a START mask holds");
_Static_assert(CSR_CAPTURE_EV_INFO_CHANNELS_SIZE == HILAT_N_CHANNELS, "ev_info carries every channel");
/* The TDC (docs/tdc.md): the first HILAT_TDC_INPUTS DUT inputs have one of HILAT_TDC_TAPS taps, each
 * with 8 bits of code in the record's fraction. A build without a TDC (or from before it) has neither
 * constant: 0. */
#ifndef HILAT_TDC_INPUTS
#define HILAT_TDC_INPUTS 0
#endif
#ifndef HILAT_TDC_TAPS
#define HILAT_TDC_TAPS 0
#endif
_Static_assert(HILAT_TDC_INPUTS <= HILAT_N_INPUTS, "a TDC on an input the rig has");
_Static_assert(HILAT_TDC_INPUTS == 0 || HILAT_FRACTION_BITS == 8 * HILAT_TDC_INPUTS,
               "the record's fraction holds 8 bits of TDC code per TDC input");
/* The record's fraction (sub-tick positions, docs/subtick.md, or TDC codes): the bits the inputs
 * fill, in whole bytes. It comes in ev_info's FRACTION field when it fits there (32 bits with the
 * masks and kind), else in a CSR of its own, latched with ev_info (capture_ev_fraction). */
#define FRACTION_BYTES hilat_fraction_bytes(HILAT_FRACTION_BITS)
_Static_assert(HILAT_FRACTION_BITS <= 8 * HILAT_EVENTS_MAX_FRACTION, "an EVENTS record carries at most 8 fraction bytes");
#ifdef CSR_CAPTURE_EV_FRACTION_ADDR
_Static_assert(HILAT_FRACTION_BITS <= 32 * CSR_CAPTURE_EV_FRACTION_SIZE, "ev_fraction carries the inputs' positions");
#elif defined(CSR_CAPTURE_EV_INFO_FRACTION_SIZE)
_Static_assert(HILAT_FRACTION_BITS <= CSR_CAPTURE_EV_INFO_FRACTION_SIZE, "ev_info carries the inputs' positions");
#else
_Static_assert(HILAT_FRACTION_BITS == 0, "a record's fraction comes from ev_info or ev_fraction");
#endif

/* A CSR field's value in its place, and out of a register word, by csr.h's CSR_<REG>_<FIELD>_OFFSET
 * and _SIZE: no bit position is typed here. */
#define FIELD_MASK(reg, field) ((uint32_t)((1ull << CSR_##reg##_##field##_SIZE) - 1u))
#define FIELD(reg, field, v) (((uint32_t)(v) & FIELD_MASK(reg, field)) << CSR_##reg##_##field##_OFFSET)
#define GET(reg, field, word) (((uint32_t)(word) >> CSR_##reg##_##field##_OFFSET) & FIELD_MASK(reg, field))

/* The Ethernet link: the stream's packetizer, the command bridge and the address registers come
 * together (gateware/soc.py's Ethernet option). */
#ifdef CSR_ETHSTREAM_BASE
#if !defined(CSR_ETHCMD_BASE) || !defined(CSR_ETHNET_BASE)
#error "an Ethernet rig has the ethstream, ethcmd and ethnet CSRs"
#endif
#define HAS_ETHERNET 1
#else
#define HAS_ETHERNET 0
#endif

/* ---- per-channel CSR addresses, from csr.h ---- */

/* Every stimulus channel has the same registers, in the same layout, at its own base (the field
 * macros of channel 0 serve them all). */
static const uint32_t stim_control[] = {
    CSR_STIMULUS_CH0_CONTROL_ADDR,
#ifdef CSR_STIMULUS_CH1_CONTROL_ADDR
    CSR_STIMULUS_CH1_CONTROL_ADDR,
#endif
#ifdef CSR_STIMULUS_CH2_CONTROL_ADDR
    CSR_STIMULUS_CH2_CONTROL_ADDR,
#endif
#ifdef CSR_STIMULUS_CH3_CONTROL_ADDR
    CSR_STIMULUS_CH3_CONTROL_ADDR,
#endif
};
_Static_assert(sizeof(stim_control) / sizeof(stim_control[0]) == HILAT_N_STIMULUS,
               "stim_control lists every stimulus channel of csr.h");
#define STIM_REG(ch, name) (stim_control[ch] + (CSR_STIMULUS_CH0_##name##_ADDR - CSR_STIMULUS_CH0_CONTROL_ADDR))
/* Capture channels' config and drop registers are consecutive words. */
#ifdef CSR_CAPTURE_CH1_CONFIG_ADDR
_Static_assert(CSR_CAPTURE_CH1_CONFIG_ADDR - CSR_CAPTURE_CH0_CONFIG_ADDR == 4, "capture config registers");
_Static_assert(CSR_CAPTURE_DROPPED1_ADDR - CSR_CAPTURE_DROPPED0_ADDR == 4, "capture drop counters");
#endif
#define CAPTURE_CONFIG_REG(ch) (CSR_CAPTURE_CH0_CONFIG_ADDR + 4u * (ch))
#define CAPTURE_DROPPED_REG(ch) (CSR_CAPTURE_DROPPED0_ADDR + 4u * (ch))

static void csr_write_u64(uint64_t v, uint32_t addr)
{
    csr_write_simple((uint32_t)(v >> 32), addr); /* most significant word first */
    csr_write_simple((uint32_t)v, addr + 4);
}

/* ---- UART: polled, with a receive ring ---- */

static uint8_t rx_ring[512];
static uint16_t rx_head, rx_tail;
static uint32_t rx_ring_overflow;

static void poll_rx(void)
{
    while (!uart_rxempty_read()) {
        uint8_t c = uart_rxtx_read();
        uart_ev_pending_write(FIELD(UART_EV_PENDING, RX, 1));
        uint16_t next = (uint16_t)((rx_head + 1u) % sizeof(rx_ring));
        if (next == rx_tail) {
            rx_ring_overflow++; /* counted; the frame it belonged to fails its CRC */
            continue;
        }
        rx_ring[rx_head] = c;
        rx_head = next;
    }
}

static void send_byte(uint8_t c)
{
    while (uart_txfull_read())
        poll_rx();
    uart_rxtx_write(c);
}

/* ---- links (docs/protocol.md, "Links") ---- */

/* Where a frame goes: the UART, or one UDP datagram to ip:port through the command bridge. */
typedef struct {
    uint8_t udp;
    uint32_t ip;
    uint16_t port;
} link_t;

static link_t reply_to;   /* the link of the command being handled */
static link_t session_to; /* frames the rig sends on its own: the link of the last HELLO */

#if HAS_ETHERNET
/* The previous datagram leaves in microseconds; a bridge that never gets ready (no ARP answer) must
 * not hang the firmware: the frame is dropped after this many polls (the host sees a reply's loss
 * by its timeout, a data frame's by the sequence gap). */
#define UDP_TX_WAIT_LOOPS 1000000u

static int udp_tx_ready(void)
{
    for (uint32_t loops = 0; loops < UDP_TX_WAIT_LOOPS; loops++) {
        if (GET(ETHCMD_TX_STATUS, READY, ethcmd_tx_status_read()))
            return 1;
        poll_rx();
    }
    return 0;
}

static void udp_send(const uint8_t *wire, size_t n, const link_t *to)
{
    if (!udp_tx_ready())
        return;
    ethcmd_tx_dst_ip_write(to->ip);
    ethcmd_tx_dst_port_write(to->port);
    for (size_t i = 0; i < n; i++)
        ethcmd_tx_data_write(wire[i]);
    ethcmd_tx_send_write(FIELD(ETHCMD_TX_SEND, SEND, 1));
}
#endif

static void transmit(const uint8_t *wire, size_t n, const link_t *to)
{
#if HAS_ETHERNET
    if (to->udp) {
        udp_send(wire, n, to);
        return;
    }
#else
    (void)to; /* the UART is the only link */
#endif
    for (size_t i = 0; i < n; i++)
        send_byte(wire[i]);
}

/* ---- session state ---- */

static int session;           /* a host said HELLO */
static uint16_t tx_seq;
static uint32_t records_sent, events_sent, frames_sent;
static hilat_frame_t out;     /* control frames */
static hilat_frame_t events;  /* the EVENTS frame being filled */
static int events_open;
static uint8_t stim_mode[HILAT_N_STIMULUS], stim_invert[HILAT_N_STIMULUS];

/* A frame the rig sends on its own (EVENTS, OVERFLOW, the engine's): to the link of the last HELLO. */
static void send_frame(hilat_frame_t *f)
{
    uint8_t wire[HILAT_MAX_WIRE];
    size_t n = hilat_frame_finish(f, wire, sizeof(wire));
    transmit(wire, n, &session_to);
    frames_sent++;
    tx_seq++;
}

/* The reply to the command being handled, kept for a repeat of that command (docs/protocol.md,
 * "Repeated commands"): the seq and CRC of the last command answered since HELLO. */
static uint8_t last_reply[HILAT_MAX_WIRE];
static size_t last_reply_len;
static int replied;           /* the command being handled was answered */
static int last_valid;        /* last_seq / last_crc name a command answered since HELLO */
static uint16_t last_seq;
static uint32_t last_crc;

static void send_reply(hilat_frame_t *f)
{
    last_reply_len = hilat_frame_finish(f, last_reply, sizeof(last_reply));
    transmit(last_reply, last_reply_len, &reply_to);
    replied = 1;
    frames_sent++;
    tx_seq++;
}

#ifdef CSR_ENGINE_BASE
static hilat_frame_t bins;      /* the ENGINE_BINS frame being filled */
static int bins_open;
static uint32_t bins_unencodable; /* ENGINE_BINS entries the encoder refused (HILAT_ERR_RANGE): lost, counted */
static hilat_frame_t outliers;  /* the ENGINE_OUTLIERS frame being filled */
static int outliers_open;
static void engine_reset(int raw);
#endif

static int data_open(void)
{
#ifdef CSR_ENGINE_BASE
    if (bins_open || outliers_open)
        return 1;
#endif
    return events_open;
}

/* Every open data frame goes out (before any other frame, so sequence numbers stay in order). */
static void flush_events(void)
{
#ifdef CSR_ENGINE_BASE
    if (outliers_open) {
        send_frame(&outliers);
        outliers_open = 0;
    }
    if (bins_open) {
        send_frame(&bins);
        bins_open = 0;
    }
#endif
    if (events_open) {
        send_frame(&events);
        events_open = 0;
    }
}

/* A reply goes out after the open data frames, so sequence numbers stay in order. */
static void send_control(void)
{
    flush_events();
    send_reply(&out);
}

static void ack(uint16_t command_seq, uint8_t code, const char *message)
{
    flush_events();
    hilat_msg_ack(&out, tx_seq, command_seq, code, message);
    send_reply(&out);
}

/* ---- gateware helpers ---- */

static void capture_disable_all(void)
{
    for (unsigned ch = 0; ch < N_CHANNELS; ch++)
        csr_write_simple(FIELD(CAPTURE_CH0_CONFIG, ENABLE, 0), CAPTURE_CONFIG_REG(ch));
    capture_commit_write(FIELD(CAPTURE_COMMIT, COMMIT, 1));
}

static void stimulus_stop(unsigned ch)
{
    csr_write_simple(FIELD(STIMULUS_CH0_CONTROL, ENABLE, 0), STIM_REG(ch, CONTROL));
    csr_write_simple(FIELD(STIMULUS_CH0_COMMIT, COMMIT, 1), STIM_REG(ch, COMMIT));
}

static uint64_t timebase_now(void)
{
    timebase_latch_write(FIELD(TIMEBASE_LATCH, LATCH, 1));
    while (!GET(TIMEBASE_STATUS, VALID, timebase_status_read()))
        ;
    return timebase_value_read();
}

/* Drain whatever the capture FIFO holds (new session: stale records are not this host's). */
static void capture_discard(void)
{
    while (GET(CAPTURE_EV_STATUS, PENDING, capture_ev_status_read()))
        capture_ev_pop_write(FIELD(CAPTURE_EV_POP, POP, 1));
}

#if HAS_ETHERNET
/* ---- the Ethernet stream's settings (docs/ethernet.md) ---- */

#define STREAM_FLUSH_US_DEFAULT 100u
#define STREAM_HEARTBEAT_MS_DEFAULT 100u

/* The settings of the last STREAM_CONFIG acknowledged since HELLO (its counters unused). */
static hilat_stream_status_t stream;

/* amount / per_second seconds in sys clock cycles, saturating at 2**32-1. */
static uint32_t sys_cycles(uint32_t amount, uint32_t per_second)
{
    uint64_t cycles = (uint64_t)amount * CONFIG_CLOCK_FREQUENCY / per_second;
    return cycles > UINT32_MAX ? UINT32_MAX : (uint32_t)cycles;
}

/* HELLO: records back to the CPU (EVENTS), the settings to their defaults. */
static void stream_reset(void)
{
    ethstream_control_write(FIELD(ETHSTREAM_CONTROL, ENABLE, 0));
    memset(&stream, 0, sizeof(stream));
    stream.flush_us = STREAM_FLUSH_US_DEFAULT;
    stream.heartbeat_ms = STREAM_HEARTBEAT_MS_DEFAULT;
}

/* A 64-bit status CSR that may change between its two words' reads: the high word read again until
 * it held still. */
static uint64_t csr_read_u64_live(uint32_t addr)
{
    uint32_t hi, lo;
    do {
        hi = csr_read_simple(addr);
        lo = csr_read_simple(addr + 4);
    } while (csr_read_simple(addr) != hi);
    return (uint64_t)hi << 32 | lo;
}
#endif

/* ---- command handlers ---- */

static void on_hello(const hilat_command_t *cmd)
{
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++) {
        stimulus_stop(ch); /* a stop keeps the pulse count: zeroed here, after it */
        csr_write_simple(FIELD(STIMULUS_CH0_FIRED_CONTROL, CLEAR, 1), STIM_REG(ch, FIRED_CONTROL));
    }
    capture_disable_all();
    capture_discard();
    capture_control_write(FIELD(CAPTURE_CONTROL, CLEAR, 1)); /* drop counters and the overflow flag */
    session = 1;
    session_to = reply_to; /* the rig's own frames go where this HELLO came from */
    last_valid = 0;        /* a new session: no command to repeat */
    tx_seq = 0;
    records_sent = events_sent = frames_sent = 0;
    events_open = 0;
#ifdef CSR_ENGINE_BASE
    engine_reset(1);
#endif
#if HAS_ETHERNET
    stream_reset();
#endif

    hilat_identify_t id = {
        .version = HILAT_PROTOCOL_VERSION,
        .ts_hz = HILAT_TS_CLOCK_FREQUENCY,
        .sys_hz = CONFIG_CLOCK_FREQUENCY,
        .n_stimulus = HILAT_N_STIMULUS,
        .n_inputs = HILAT_N_INPUTS,
        .fifo_depth = HILAT_FIFO_DEPTH,
        .pin_to_stamp_delay = HILAT_PIN_TO_STAMP_DELAY,
        .capabilities = HILAT_CAP_DITHER | HILAT_CAP_RANDOM | HILAT_CAP_BURST | HILAT_CAP_ABSOLUTE_START
                        | HILAT_CAP_GLITCH_FILTER | HILAT_CAP_TAG_CHANNEL
                        | (HILAT_SAMPLES_PER_TICK > 1 ? HILAT_CAP_SUBTICK : 0u)
#ifdef CSR_ENGINE_BASE
                        | HILAT_CAP_ENGINE
#endif
#if HAS_ETHERNET
                        | HILAT_CAP_ETHERNET
#endif
                        ,
        .min_interval = HILAT_MIN_INTERVAL,
        .glitch_max = HILAT_GLITCH_MAX,
        .start_margin = HILAT_START_MARGIN,
        .samples_per_tick = HILAT_SAMPLES_PER_TICK,
        .firmware = FIRMWARE_IDENTITY,
        .gateware = HILAT_GATEWARE_IDENTITY,
        .channels = HILAT_CHANNELS,
        .uart_baud = HILAT_UART_BAUDRATE,
        .tdc_inputs = HILAT_TDC_INPUTS,
        .tdc_taps = HILAT_TDC_TAPS,
    };
#if HAS_ETHERNET
    uint64_t mac = ethnet_mac_read();
    id.ethernet = 1;
    id.eth_ip = ethnet_ip_read(); /* the address now: NET_CONFIG may have changed the build's */
    for (unsigned i = 0; i < HILAT_MAC_BYTES; i++)
        id.eth_mac[i] = (uint8_t)(mac >> (8 * (HILAT_MAC_BYTES - 1 - i)));
    id.eth_command_port = HILAT_ETH_COMMAND_PORT;
    id.eth_stream_port = HILAT_ETH_STREAM_PORT;
    id.eth_record_words = HILAT_ETH_RECORD_WORDS;
    id.eth_max_records = HILAT_ETH_MAX_RECORDS;
#endif
    (void)cmd;
    hilat_msg_identify(&out, tx_seq, &id);
    send_control();
}

static const char *check_stim_config(const hilat_stim_config_t *c)
{
    if (c->channel >= HILAT_N_STIMULUS) return "no such stimulus channel";
    if (c->mode > HILAT_MODE_ONESHOT) return "unknown mode";
    if (c->width < 1) return "width must be >= 1 tick";
    uint32_t shortest = c->period;
    if (c->mode == HILAT_MODE_DITHER) {
        if (c->jitter >= c->period) return "jitter must be < period";
        if ((uint64_t)c->period + c->jitter >= (1ull << 32)) return "period + jitter must be < 2**32";
        shortest = c->period - c->jitter;
    }
    if (c->mode == HILAT_MODE_BURST) {
        if (c->burst_count < 1) return "burst_count must be >= 1";
        uint64_t span = (uint64_t)(c->burst_count - 1u) * c->burst_spacing;
        if (span + HILAT_MIN_INTERVAL > c->period) return "burst does not fit in its period";
        if (c->burst_count > 1 && c->burst_spacing < shortest) shortest = c->burst_spacing;
        if (c->period - span < shortest) shortest = (uint32_t)(c->period - span);
    }
    if (c->mode != HILAT_MODE_ONESHOT) {
        if (shortest < HILAT_MIN_INTERVAL) return "interval shorter than the rig's minimum (IDENTIFY)";
        if (c->width >= shortest) return "width must be shorter than the shortest interval";
    }
    return 0;
}

static void on_stim_config(const hilat_command_t *cmd)
{
    const hilat_stim_config_t *c = &cmd->u.stim_config;
    const char *err = check_stim_config(c);
    if (err) {
        ack(cmd->seq, HILAT_ACK_REFUSED, err);
        return;
    }
    unsigned ch = c->channel;
    csr_write_simple(c->width, STIM_REG(ch, WIDTH));
    csr_write_simple(c->period, STIM_REG(ch, PERIOD));
    csr_write_simple(c->jitter, STIM_REG(ch, JITTER));
    csr_write_simple(c->probability, STIM_REG(ch, PROBABILITY));
    csr_write_simple(c->burst_count, STIM_REG(ch, BURST_COUNT));
    csr_write_simple(c->burst_spacing, STIM_REG(ch, BURST_SPACING));
    csr_write_simple(c->count, STIM_REG(ch, COUNT));
    csr_write_simple(c->seed, STIM_REG(ch, SEED));
    stim_mode[ch] = c->mode;
    stim_invert[ch] = c->invert ? 1 : 0;
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_capture_config(const hilat_command_t *cmd)
{
    const hilat_capture_config_t *c = &cmd->u.capture_config;
    if (c->n != N_CHANNELS) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "channel count differs from the rig's");
        return;
    }
    for (unsigned ch = 0; ch < N_CHANNELS; ch++) {
        uint8_t flags = c->flags[ch];
        uint32_t glitch = c->glitch[ch] > HILAT_GLITCH_MAX ? HILAT_GLITCH_MAX : c->glitch[ch];
        csr_write_simple(FIELD(CAPTURE_CH0_CONFIG, ENABLE, (flags & HILAT_CAPTURE_ENABLE) != 0)
                         | FIELD(CAPTURE_CH0_CONFIG, RISE, (flags & HILAT_CAPTURE_RISE) != 0)
                         | FIELD(CAPTURE_CH0_CONFIG, FALL, (flags & HILAT_CAPTURE_FALL) != 0)
                         | FIELD(CAPTURE_CH0_CONFIG, GLITCH, glitch),
                         CAPTURE_CONFIG_REG(ch));
    }
    capture_commit_write(FIELD(CAPTURE_COMMIT, COMMIT, 1));
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_start(const hilat_command_t *cmd)
{
    uint8_t mask = cmd->u.start.channels;
    if (mask >> HILAT_N_STIMULUS) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "no such stimulus channel");
        return;
    }
    if (cmd->u.start.at_time && cmd->u.start.start <= timebase_now() + HILAT_START_MARGIN) {
        ack(cmd->seq, HILAT_ACK_LATE, "start time has passed (or is closer than the start margin)");
        return;
    }
#if HAS_ETHERNET
    /* START restarts the stream (seq and record index from 0, the session latched) before any
     * stimulus of the run fires. */
    ethstream_session_write(stream.session);
    ethstream_control_write(FIELD(ETHSTREAM_CONTROL, ENABLE, stream.enabled) | FIELD(ETHSTREAM_CONTROL, RESTART, 1));
#endif
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++) {
        if (!(mask & (1u << ch)))
            continue;
        csr_write_u64(cmd->u.start.start, STIM_REG(ch, START_TIME));
        uint32_t control = FIELD(STIMULUS_CH0_CONTROL, ENABLE, 1) | FIELD(STIMULUS_CH0_CONTROL, MODE, stim_mode[ch])
                           | FIELD(STIMULUS_CH0_CONTROL, INVERT, stim_invert[ch])
                           | FIELD(STIMULUS_CH0_CONTROL, AT_TIME, cmd->u.start.at_time != 0);
        csr_write_simple(control, STIM_REG(ch, CONTROL));
        csr_write_simple(FIELD(STIMULUS_CH0_COMMIT, COMMIT, 1), STIM_REG(ch, COMMIT));
    }
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_stop(const hilat_command_t *cmd)
{
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        if (cmd->u.stop.channels & (1u << ch))
            stimulus_stop(ch);
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_status(const hilat_command_t *cmd)
{
    hilat_status_t st;
    memset(&st, 0, sizeof(st));
    capture_control_write(FIELD(CAPTURE_CONTROL, SNAPSHOT, 1)); /* the drop counters */
    while (!GET(CAPTURE_STATUS, VALID, capture_status_read()))
        ;
    st.overflow = (uint8_t)GET(CAPTURE_STATUS, OVERFLOW, capture_status_read());
    st.n = N_CHANNELS;
    for (unsigned ch = 0; ch < N_CHANNELS; ch++)
        st.dropped[ch] = csr_read_simple(CAPTURE_DROPPED_REG(ch));
    st.stim_n = HILAT_N_STIMULUS;
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        st.stim_status[ch] = (uint8_t)csr_read_simple(STIM_REG(ch, STATUS));
    /* The pulses each channel fired: the count keeps changing during a run, so it is latched in its
     * clock domain first (a snapshot), then read once valid. */
    st.fired_n = HILAT_N_STIMULUS;
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        csr_write_simple(FIELD(STIMULUS_CH0_FIRED_CONTROL, SNAPSHOT, 1), STIM_REG(ch, FIRED_CONTROL));
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++) {
        while (!GET(STIMULUS_CH0_FIRED_STATUS, VALID, csr_read_simple(STIM_REG(ch, FIRED_STATUS))))
            ;
        st.fired[ch] = csr_read_simple(STIM_REG(ch, FIRED));
    }
    flush_events();
    st.records_sent = records_sent;
    st.events_sent = events_sent;
    st.frames_sent = frames_sent + 1; /* this STATUS frame included */
    hilat_msg_status(&out, tx_seq, &st);
    send_reply(&out);
    (void)cmd;
}

static void on_time(const hilat_command_t *cmd)
{
    uint64_t now = timebase_now();
    flush_events();
    hilat_msg_time(&out, tx_seq, cmd->seq, now);
    send_reply(&out);
}

#ifdef CSR_ENGINE_BASE
/* ---- measurement engine (docs/engine.md) ---- */

static void engine_discard(void)
{
    while (GET(ENGINE_BINS_STATUS, PENDING, engine_bins_status_read()))
        engine_bins_pop_write(FIELD(ENGINE_BINS_POP, POP, 1));
    while (GET(ENGINE_OUTLIER_STATUS, PENDING, engine_outlier_status_read()))
        engine_outlier_pop_write(FIELD(ENGINE_OUTLIER_POP, POP, 1));
}

/* Stop and zero the engine (histograms, statistics, counters); raw records on again if asked. */
static void engine_reset(int raw)
{
    engine_control_write(FIELD(ENGINE_CONTROL, CLEAR, 1));
    while (GET(ENGINE_STATUS, BUSY, engine_status_read()))
        engine_discard();
    engine_discard();
    bins_open = outliers_open = 0;
    bins_unencodable = 0;
    capture_raw_write(FIELD(CAPTURE_RAW, ENABLE, raw != 0));
    capture_commit_write(FIELD(CAPTURE_COMMIT, COMMIT, 1));
}

static const char *check_engine_config(const hilat_engine_config_t *c)
{
    if (c->start_channel >= N_CHANNELS || c->isr_channel >= N_CHANNELS || c->task_channel >= N_CHANNELS)
        return "engine: no such channel";
    if (c->tag_channel != 0xFFu && c->tag_channel >= N_CHANNELS)
        return "engine: no such tag channel";
    if (c->deadline != 0 && c->deadline < HILAT_ENGINE_MIN_SPACING)
        return "engine: deadline below the minimum spacing";
    if (c->interval_shift < HILAT_ENGINE_INTERVAL_SHIFT_MIN || c->interval_shift > HILAT_ENGINE_INTERVAL_SHIFT_MAX)
        return "engine: interval shift out of range";
    /* A window open across two interval boundaries would hold back the first one's sweep while
       samples of the third arrive: every window must close within 2**shift - 2 sweeps. */
    if ((c->flags & HILAT_ENGINE_ENABLE)
        && (c->deadline == 0 || c->deadline > (1u << c->interval_shift) - 2u * HILAT_ENGINE_SWEEP_TICKS))
        return "engine: deadline 0 or above 2**shift - 2 sweeps (docs/engine.md)";
    if (c->trigger_threshold != 0 && c->trigger_width == 0)
        return "engine: trigger width must be >= 1";
    return 0;
}

static void on_engine_config(const hilat_command_t *cmd)
{
    const hilat_engine_config_t *c = &cmd->u.engine_config;
    const char *why = check_engine_config(c);
    if (why) {
        ack(cmd->seq, HILAT_ACK_REFUSED, why);
        return;
    }
    flush_events();
    int enable = (c->flags & HILAT_ENGINE_ENABLE) != 0;
    engine_reset(!enable || (c->flags & HILAT_ENGINE_RAW));
    if (enable) {
        int has_tag = c->tag_channel != 0xFFu;
        engine_config_write(FIELD(ENGINE_CONFIG, START_CHANNEL, c->start_channel)
                            | FIELD(ENGINE_CONFIG, START_LEVEL, c->start_level)
                            | FIELD(ENGINE_CONFIG, ISR_CHANNEL, c->isr_channel)
                            | FIELD(ENGINE_CONFIG, ISR_LEVEL, c->isr_level)
                            | FIELD(ENGINE_CONFIG, TASK_CHANNEL, c->task_channel)
                            | FIELD(ENGINE_CONFIG, TASK_LEVEL, c->task_level)
                            | FIELD(ENGINE_CONFIG, TAG_CHANNEL, has_tag ? c->tag_channel : 0)
                            | FIELD(ENGINE_CONFIG, TAG_LEVEL, c->tag_level)
                            | FIELD(ENGINE_CONFIG, TAG_ENABLE, has_tag)
                            | FIELD(ENGINE_CONFIG, INTERVAL_SHIFT, c->interval_shift - HILAT_ENGINE_INTERVAL_SHIFT_MIN)
                            | FIELD(ENGINE_CONFIG, TRIGGER_RESPONSE, c->trigger_response)
                            | FIELD(ENGINE_CONFIG, TRIGGER_ON_LATE, (c->flags & HILAT_ENGINE_TRIGGER_ON_LATE) != 0));
        engine_deadline_write(c->deadline);
        engine_offset_write(c->offset);
        engine_threshold0_write(c->threshold[0]);
        engine_threshold1_write(c->threshold[1]);
        engine_threshold2_write(c->threshold[2]);
        engine_trigger_threshold_write(c->trigger_threshold);
        engine_trigger_width_write(c->trigger_width);
        engine_control_write(FIELD(ENGINE_CONTROL, START, 1));
    }
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_engine_stats(const hilat_command_t *cmd)
{
    hilat_engine_stats_t st;
    memset(&st, 0, sizeof(st));
    engine_control_write(FIELD(ENGINE_CONTROL, SNAPSHOT, 1));
    uint32_t status;
    while (!GET(ENGINE_STATUS, VALID, status = engine_status_read()))
        ;
    st.state = (uint8_t)(GET(ENGINE_STATUS, RUNNING, status) | (GET(ENGINE_STATUS, FLUSHED, status) << 1));
    st.samples = engine_samples_read();
    st.samples_lost = engine_samples_lost_read();
    st.bins_lost = engine_bins_lost_read();
    st.bins_lost = st.bins_lost + bins_unencodable < st.bins_lost ? UINT32_MAX : st.bins_lost + bins_unencodable;
    st.outliers_lost = engine_outliers_lost_read();
    st.trigger_delay = HILAT_ENGINE_TRIGGER_DELAY;
    st.min_spacing = HILAT_ENGINE_MIN_SPACING;
    st.interval_shift_min = HILAT_ENGINE_INTERVAL_SHIFT_MIN;
    st.bins = HILAT_ENGINE_BINS;
    /* One record of the copy at a time: kind * slots + slot (untagged, tagged, misses, below). */
    for (unsigned k = 0; k < 3u; k++) {
        unsigned first = k * HILAT_ENGINE_STAT_SLOTS;
        engine_stats_index_write(first + HILAT_ENGINE_STAT_MISSES);
        st.kinds[k].misses = engine_stats_count_read();
        st.kinds[k].duplicates = engine_stats_duplicates_read();
        engine_stats_index_write(first + HILAT_ENGINE_STAT_BELOW);
        st.kinds[k].below = engine_stats_count_read();
        for (unsigned t = 0; t < 2u; t++) {
            engine_stats_index_write(first + t);
            st.kinds[k].tags[t].count = engine_stats_count_read();
            st.kinds[k].tags[t].min = engine_stats_min_read();
            st.kinds[k].tags[t].max = engine_stats_max_read();
            st.kinds[k].tags[t].sum = engine_stats_sum_read();
        }
    }
    flush_events();
    hilat_msg_engine_stats(&out, tx_seq, cmd->seq, &st);
    send_reply(&out);
}

/* Bins and outliers before raw records: the engine's results are complete, raw is best effort. */
static int drain_engine(void)
{
    int moved = 0;
    for (int budget = 8; budget > 0 && GET(ENGINE_OUTLIER_STATUS, PENDING, engine_outlier_status_read()); budget--) {
        uint64_t start = engine_outlier_start_read();
        uint32_t values[3];
        /* The 96-bit CSR, most significant word first. */
        values[2] = csr_read_simple(CSR_ENGINE_OUTLIER_VALUES_ADDR);
        values[1] = csr_read_simple(CSR_ENGINE_OUTLIER_VALUES_ADDR + 4u);
        values[0] = csr_read_simple(CSR_ENGINE_OUTLIER_VALUES_ADDR + 8u);
        uint8_t flags = (uint8_t)engine_outlier_flags_read();
        engine_outlier_pop_write(FIELD(ENGINE_OUTLIER_POP, POP, 1));
        if (!outliers_open) {
            flush_events(); /* one open data frame at a time: its seq is taken when it begins */
            hilat_engine_outliers_begin(&outliers, tx_seq);
            outliers_open = 1;
        }
        if (!hilat_engine_outliers_add(&outliers, start, flags, values)) {
            send_frame(&outliers);
            hilat_engine_outliers_begin(&outliers, tx_seq);
            hilat_engine_outliers_add(&outliers, start, flags, values);
        }
        moved = 1;
    }
    for (int budget = 32; budget > 0 && GET(ENGINE_BINS_STATUS, PENDING, engine_bins_status_read()); budget--) {
        uint32_t info = engine_bins_info_read();
        uint32_t interval = engine_bins_interval_read();
        uint64_t count = engine_bins_count_read();
        engine_bins_pop_write(FIELD(ENGINE_BINS_POP, POP, 1));
        uint8_t kind = (uint8_t)GET(ENGINE_BINS_INFO, KIND, info);
        int is_close = GET(ENGINE_BINS_INFO, TYPE, info) != 0;
        for (int attempt = 0; attempt < 2; attempt++) {
            if (!bins_open) {
                flush_events();
                hilat_engine_bins_begin(&bins, tx_seq);
                bins_open = 1;
            }
            int added = is_close ? hilat_engine_bins_add_close(&bins, kind, interval)
                                 : hilat_engine_bins_add_bin(&bins, kind, (uint8_t)GET(ENGINE_BINS_INFO, TAG, info),
                                                             interval, (uint16_t)GET(ENGINE_BINS_INFO, BIN, info), count);
            if (added < 0) {
                /* Only a faulty engine gives a kind, tag or bin out of range: the entry is lost, and
                 * counted with the engine's own lost bins. */
                if (bins_unencodable != UINT32_MAX)
                    bins_unencodable++;
                break;
            }
            if (added)
                break;
            send_frame(&bins);
            bins_open = 0;
        }
        moved = 1;
    }
    return moved;
}

/* Close the open window and every interval, send every bin; the ACK follows the last of them. */
#define ENGINE_FLUSH_LOOPS 1000000u
static void on_engine_flush(const hilat_command_t *cmd)
{
    engine_control_write(FIELD(ENGINE_CONTROL, FLUSH, 1));
    /* The sweeps take well under a million loops; a rig that never finishes says so. */
    for (uint32_t loops = 0; loops < ENGINE_FLUSH_LOOPS; loops++) {
        uint32_t status = engine_status_read();
        int done = !GET(ENGINE_STATUS, RUNNING, status) || GET(ENGINE_STATUS, FLUSHED, status);
        drain_engine();
        if (done && !GET(ENGINE_BINS_STATUS, PENDING, engine_bins_status_read())
            && !GET(ENGINE_OUTLIER_STATUS, PENDING, engine_outlier_status_read())) {
            ack(cmd->seq, HILAT_ACK_OK, 0);
            return;
        }
    }
    ack(cmd->seq, HILAT_ACK_REFUSED, GET(ENGINE_STATUS, BUSY, engine_status_read())
        ? "engine flush did not finish: still busy" : "engine flush did not finish: intervals not closed");
}
#endif

#if HAS_ETHERNET
/* ---- the Ethernet link's commands (docs/ethernet.md) ---- */

static void on_stream_config(const hilat_command_t *cmd)
{
    const hilat_stream_config_t *c = &cmd->u.stream_config;
    if (c->flush_us == 0) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "stream: flush_us must be >= 1");
        return;
    }
    if (!reply_to.udp && (c->dst_ip == 0 || c->dst_port == 0)) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "stream: destination 0 is the command datagram's source: none over serial");
        return;
    }
    flush_events(); /* the records read so far leave as EVENTS before the next go to the stream */
    stream.enabled = c->enable ? 1 : 0;
    stream.session = c->session;
    stream.dst_ip = c->dst_ip ? c->dst_ip : reply_to.ip;
    stream.dst_port = c->dst_port ? c->dst_port : reply_to.port;
    stream.flush_us = c->flush_us;
    stream.heartbeat_ms = c->heartbeat_ms;
    ethstream_dst_ip_write(stream.dst_ip);
    ethstream_dst_port_write(stream.dst_port);
    ethstream_flush_cycles_write(sys_cycles(stream.flush_us, 1000000u));
    ethstream_heartbeat_cycles_write(sys_cycles(stream.heartbeat_ms, 1000u));
    ethstream_session_write(stream.session);
    ethstream_control_write(FIELD(ETHSTREAM_CONTROL, ENABLE, stream.enabled));
    ack(cmd->seq, HILAT_ACK_OK, 0);
}

static void on_stream_status(const hilat_command_t *cmd)
{
    hilat_stream_status_t st = stream;
    st.datagrams = ethstream_datagrams_read();
    st.records = csr_read_u64_live(CSR_ETHSTREAM_RECORDS_ADDR);
    st.rx_frames = GET(ETHNET_STATUS, RX_FRAMES, ethnet_status_read());
    st.link = st.rx_frames ? HILAT_STREAM_LINK_UP : 0u;
    st.command_dropped = ethcmd_rx_dropped_read();
    flush_events();
    hilat_msg_stream_status(&out, tx_seq, cmd->seq, &st);
    send_reply(&out);
}

static void on_net_config(const hilat_command_t *cmd)
{
    const hilat_net_config_t *c = &cmd->u.net_config;
    if (c->ip == 0) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "net: address 0.0.0.0");
        return;
    }
    if (c->mac[0] & 1u) {
        ack(cmd->seq, HILAT_ACK_REFUSED, "net: multicast MAC");
        return;
    }
    ack(cmd->seq, HILAT_ACK_OK, 0); /* from the old address */
    if (reply_to.udp)
        udp_tx_ready(); /* the ACK's datagram has left */
    uint64_t mac = 0;
    for (unsigned i = 0; i < HILAT_MAC_BYTES; i++)
        mac = mac << 8 | c->mac[i];
    ethnet_ip_write(c->ip);
    ethnet_mac_write(mac);
}
#endif

/* The frame (COBS bytes, no delimiter) of a command that came from `from`. */
static void handle_frame(const uint8_t *wire, size_t len, const link_t *from)
{
    hilat_command_t cmd;
    int err = hilat_parse_command(wire, len, &cmd);
    reply_to = *from;
    if (err == HILAT_OK && cmd.type == HILAT_MSG_HELLO) {
        on_hello(&cmd);
        return;
    }
    if (err == HILAT_ERR_VERSION && cmd.type == HILAT_MSG_HELLO) {
        /* A host of another protocol version: tell it ours (a frame of this version, which it
         * counts and names), whatever the session; the session itself is left as it is. */
        ack(cmd.seq, HILAT_ACK_VERSION, "the rig speaks protocol version " HILAT_PROTOCOL_VERSION_TEXT);
        last_valid = 0; /* its ACK took the kept reply's place */
        return;
    }
    if (!session || HILAT_IS_CORRUPT(err))
        return; /* nothing is sent before HELLO; corrupt frames carry no trustworthy seq: the host
                 * times out and retries */
    if (last_valid && cmd.seq == last_seq && cmd.crc == last_crc) {
        /* The last command again (its reply was lost): the same reply, not a second execution. */
        transmit(last_reply, last_reply_len, &reply_to);
        return;
    }
    replied = 0;
    if (err != HILAT_OK) {
        ack(cmd.seq, HILAT_ACK_MALFORMED, err == HILAT_ERR_VERSION ? "protocol version differs" : "malformed command");
    } else {
        switch (cmd.type) {
        case HILAT_MSG_STIM_CONFIG: on_stim_config(&cmd); break;
        case HILAT_MSG_CAPTURE_CONFIG: on_capture_config(&cmd); break;
        case HILAT_MSG_START: on_start(&cmd); break;
        case HILAT_MSG_STOP: on_stop(&cmd); break;
        case HILAT_MSG_STATUS_REQ: on_status(&cmd); break;
        case HILAT_MSG_TIME_REQ: on_time(&cmd); break;
#ifdef CSR_ENGINE_BASE
        case HILAT_MSG_ENGINE_CONFIG: on_engine_config(&cmd); break;
        case HILAT_MSG_ENGINE_STATS_REQ: on_engine_stats(&cmd); break;
        case HILAT_MSG_ENGINE_FLUSH: on_engine_flush(&cmd); break;
#endif
#if HAS_ETHERNET
        case HILAT_MSG_STREAM_CONFIG: on_stream_config(&cmd); break;
        case HILAT_MSG_STREAM_STATUS_REQ: on_stream_status(&cmd); break;
        case HILAT_MSG_NET_CONFIG: on_net_config(&cmd); break;
#else
        case HILAT_MSG_STREAM_CONFIG:
        case HILAT_MSG_STREAM_STATUS_REQ:
        case HILAT_MSG_NET_CONFIG: ack(cmd.seq, HILAT_ACK_REFUSED, "no Ethernet on this rig"); break;
#endif
        default: ack(cmd.seq, HILAT_ACK_MALFORMED, "unknown command"); break;
        }
    }
    if (replied) {
        last_valid = 1;
        last_seq = cmd.seq;
        last_crc = cmd.crc;
    }
}

/* ---- event path ---- */

#define IDLE_FLUSH_LOOPS 200u /* about 100 us of idle polling at 50 MHz */
static uint32_t idle_loops;

static void drain_events(void)
{
    for (int budget = 32; budget > 0 && GET(CAPTURE_EV_STATUS, PENDING, capture_ev_status_read()); budget--) {
        uint64_t timestamp = capture_ev_timestamp_read();
        uint32_t info = capture_ev_info_read();
#ifdef CSR_CAPTURE_EV_FRACTION_ADDR
        uint64_t fraction = capture_ev_fraction_read(); /* the same record's: read before the pop */
#elif defined(CSR_CAPTURE_EV_INFO_FRACTION_SIZE)
        uint64_t fraction = GET(CAPTURE_EV_INFO, FRACTION, info);
#else
        uint64_t fraction = 0;
#endif
        capture_ev_pop_write(FIELD(CAPTURE_EV_POP, POP, 1));
        uint16_t channels = (uint16_t)GET(CAPTURE_EV_INFO, CHANNELS, info);
        uint16_t levels = (uint16_t)GET(CAPTURE_EV_INFO, LEVELS, info);
        if (GET(CAPTURE_EV_INFO, KIND, info)) { /* overflow marker from the gateware */
            flush_events();
            hilat_msg_overflow(&out, tx_seq, timestamp, channels);
            send_frame(&out);
            continue;
        }
        if (!events_open) {
            flush_events(); /* an open engine frame first */
            hilat_events_begin(&events, tx_seq, timestamp, hilat_mask_bytes(N_CHANNELS), FRACTION_BYTES);
            events_open = 1;
        }
        if (!hilat_events_add(&events, timestamp, channels, levels, fraction)) {
            flush_events();
            hilat_events_begin(&events, tx_seq, timestamp, hilat_mask_bytes(N_CHANNELS), FRACTION_BYTES);
            events_open = 1;
            hilat_events_add(&events, timestamp, channels, levels, fraction);
        }
        records_sent++;
        for (uint16_t m = channels; m; m &= (uint16_t)(m - 1u))
            events_sent++;
    }
    /* Frames go out when full, or after IDLE_FLUSH_LOOPS polls found nothing new: sending a
     * frame per record would spend the CPU on per-frame work just when the rate is high. */
    if (data_open()) {
        if (GET(CAPTURE_EV_STATUS, PENDING, capture_ev_status_read()))
            idle_loops = 0;
        else if (++idle_loops >= IDLE_FLUSH_LOOPS) {
            idle_loops = 0;
            flush_events();
        }
    }
}

static hilat_rx_t rx;
static const link_t uart_link = {0, 0, 0};

#if HAS_ETHERNET
static hilat_rx_t udp_rx;
static link_t udp_from;       /* the source of the datagram being read */
static int udp_in_datagram;   /* udp_from is that of the datagram at the bridge's head */

/* Command datagrams: one frame each, with its 0x00 delimiter; a datagram that lacks it is closed as
 * if it had one, so a frame never spans two datagrams. */
static void poll_udp(void)
{
    for (int budget = 2 * HILAT_MAX_WIRE; budget > 0; budget--) {
        uint32_t status = ethcmd_rx_status_read();
        if (!GET(ETHCMD_RX_STATUS, PENDING, status))
            return;
        if (!udp_in_datagram) {
            udp_from.udp = 1;
            udp_from.ip = ethcmd_rx_src_ip_read();
            udp_from.port = (uint16_t)ethcmd_rx_src_port_read();
            udp_in_datagram = 1;
        }
        uint8_t c = (uint8_t)ethcmd_rx_data_read();
        ethcmd_rx_pop_write(FIELD(ETHCMD_RX_POP, POP, 1));
        size_t n = hilat_rx_feed(&udp_rx, c);
        if (GET(ETHCMD_RX_STATUS, LAST, status)) {
            udp_in_datagram = 0;
            if (c != 0)
                n = hilat_rx_feed(&udp_rx, 0);
        }
        if (n)
            handle_frame(udp_rx.buf, n, &udp_from);
    }
}
#endif

static void init(void)
{
    hilat_rx_init(&rx);
#if HAS_ETHERNET
    hilat_rx_init(&udp_rx);
    ethstream_control_write(FIELD(ETHSTREAM_CONTROL, ENABLE, 0));
#endif
    capture_disable_all();
    for (unsigned ch = 0; ch < HILAT_N_STIMULUS; ch++)
        stimulus_stop(ch);
}

/* One pass of the main loop (tests/firmware/fuzz_firmware_commands.c runs it on a fake CSR bus). */
static void service(void)
{
    poll_rx();
    while (rx_tail != rx_head) {
        uint8_t c = rx_ring[rx_tail];
        rx_tail = (uint16_t)((rx_tail + 1u) % sizeof(rx_ring));
        size_t n = hilat_rx_feed(&rx, c);
        if (n)
            handle_frame(rx.buf, n, &uart_link);
    }
#if HAS_ETHERNET
    poll_udp();
#endif
    if (session) {
#ifdef CSR_ENGINE_BASE
        if (drain_engine())
            return;
#endif
        drain_events();
    }
}

/* crt0's trap handler calls isr(). The firmware polls and enables no interrupt; LiteX's isr would
 * print an unhandled one on the UART (a protocol stream: it must carry frames only) and brings
 * printf into the ROM (about 2.5 KiB of its 20 on a rig with the engine and Ethernet). */
void isr(void);
void isr(void)
{
}

#ifndef HILAT_FIRMWARE_NO_MAIN
int main(void)
{
    init();
    for (;;)
        service();
    return 0;
}
#endif
