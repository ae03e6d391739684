/*
 * hilat rig wire protocol, version 4 (docs/protocol.md).
 *
 * Freestanding C99: only <stdint.h> and <stddef.h>; no allocation, no stdio, no libc calls.
 * Compiled for the rig's soft CPU and, in the tests, for the host.
 *
 *   wire:    COBS(payload || crc32) 0x00
 *   payload: version:u8 type:u8 seq:u16 body...      (little-endian)
 *
 * Rig -> host: fill a hilat_frame_t with one of the hilat_msg_* / hilat_events_* helpers (or the
 * generic hilat_frame_put_* appenders), then hilat_frame_finish() writes the wire bytes.
 * Host -> rig: feed received bytes to hilat_rx_feed(); when it returns a frame length, give
 * rx.buf to hilat_parse_command().
 */
#ifndef HILAT_PROTOCOL_H
#define HILAT_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define HILAT_PROTOCOL_VERSION 5u
#define HILAT_PROTOCOL_VERSION_TEXT "5"

/* Sizes. */
#define HILAT_HEADER_SIZE 4u    /* version, type, seq */
#define HILAT_CRC_SIZE 4u
#define HILAT_MIN_FRAME 8u      /* decoded: header + CRC */
#define HILAT_MAX_PAYLOAD 250u  /* header + body */
#define HILAT_MAX_DECODED (HILAT_MAX_PAYLOAD + HILAT_CRC_SIZE)  /* 254 */
#define HILAT_MAX_ENCODED 255u  /* COBS of HILAT_MAX_DECODED bytes, no delimiter */
#define HILAT_MAX_WIRE 256u     /* HILAT_MAX_ENCODED + 0x00 delimiter */
/* Worst-case COBS output for n input bytes (no delimiter). */
#define HILAT_COBS_MAX_ENCODED(n) ((n) + (n) / 254u + 1u)
/* Capture channel masks are at most 16 bits (EVENTS: 1 or 2 bytes a mask, said per frame;
 * OVERFLOW: u16); stimulus channel masks (START, STOP) are u8. */
#define HILAT_MAX_CHANNELS 16u
#define HILAT_MAX_STIMULUS 8u
/* EVENTS: the body of an empty frame (base:u64 format:u8) and the largest record (10-byte
 * uleb128 + two 2-byte masks + an 8-byte fraction). The format byte: bits 0-3 the bytes of a mask
 * (1 or 2), bits 4-7 the bytes of a record's fraction (0 .. 8: sub-tick samples, or 8 bits of TDC
 * code per TDC input, docs/tdc.md). */
#define HILAT_EVENTS_EMPTY (HILAT_HEADER_SIZE + 9u)
#define HILAT_EVENTS_MAX_FRACTION 8u
#define HILAT_EVENTS_MAX_RECORD 22u
#define HILAT_EVENTS_FORMAT(mask_bytes, fraction_bytes) ((uint8_t)((mask_bytes) | ((fraction_bytes) << 4)))

/* Message types. Host -> rig (>= 0x80). */
#define HILAT_MSG_HELLO 0x81u
#define HILAT_MSG_STIM_CONFIG 0x82u
#define HILAT_MSG_CAPTURE_CONFIG 0x83u
#define HILAT_MSG_START 0x84u
#define HILAT_MSG_STOP 0x85u
#define HILAT_MSG_STATUS_REQ 0x86u
#define HILAT_MSG_TIME_REQ 0x87u
#define HILAT_MSG_ENGINE_CONFIG 0x88u
#define HILAT_MSG_ENGINE_STATS_REQ 0x89u
#define HILAT_MSG_ENGINE_FLUSH 0x8Au
#define HILAT_MSG_STREAM_CONFIG 0x8Bu
#define HILAT_MSG_STREAM_STATUS_REQ 0x8Cu
#define HILAT_MSG_NET_CONFIG 0x8Du
/* Rig -> host (< 0x80). */
#define HILAT_MSG_IDENTIFY 0x01u
#define HILAT_MSG_EVENTS 0x02u
#define HILAT_MSG_OVERFLOW 0x03u
#define HILAT_MSG_STATUS 0x04u
#define HILAT_MSG_ACK 0x05u
#define HILAT_MSG_TIME 0x06u
#define HILAT_MSG_ENGINE_BINS 0x07u
#define HILAT_MSG_ENGINE_OUTLIERS 0x08u
#define HILAT_MSG_ENGINE_STATS 0x09u
#define HILAT_MSG_STREAM_STATUS 0x0Au

/* Stimulus modes. */
#define HILAT_MODE_PERIODIC 0u
#define HILAT_MODE_DITHER 1u
#define HILAT_MODE_RANDOM 2u
#define HILAT_MODE_BURST 3u
#define HILAT_MODE_ONESHOT 4u

/* ACK codes. */
#define HILAT_ACK_OK 0u        /* done */
#define HILAT_ACK_REFUSED 1u   /* a setting the rig cannot apply (message says which) */
#define HILAT_ACK_LATE 2u      /* START: the start time has passed or is too close */
#define HILAT_ACK_MALFORMED 3u /* a frame the rig cannot parse, or an unknown command */
#define HILAT_ACK_VERSION 4u   /* HELLO of another protocol version (sent whatever the session) */

/* IDENTIFY capabilities. */
#define HILAT_CAP_DITHER (1u << 0)
#define HILAT_CAP_RANDOM (1u << 1)
#define HILAT_CAP_BURST (1u << 2)
#define HILAT_CAP_ABSOLUTE_START (1u << 3)
#define HILAT_CAP_GLITCH_FILTER (1u << 4)
#define HILAT_CAP_TAG_CHANNEL (1u << 5)
#define HILAT_CAP_SUBTICK (1u << 6)
#define HILAT_CAP_ENGINE (1u << 7) /* the measurement engine (docs/engine.md) */
#define HILAT_CAP_ETHERNET (1u << 8) /* the Ethernet link (docs/ethernet.md) */

/* The Ethernet link (docs/ethernet.md): STREAM_STATUS link bits. */
#define HILAT_STREAM_LINK_UP (1u << 0) /* Ethernet frames received since reset */
#define HILAT_MAC_BYTES 6u

/* CAPTURE_CONFIG per-channel flags. */
#define HILAT_CAPTURE_ENABLE (1u << 0)
#define HILAT_CAPTURE_RISE (1u << 1)
#define HILAT_CAPTURE_FALL (1u << 2)

/* STATUS per-stimulus-channel bits. */
#define HILAT_STIM_RUNNING (1u << 0)
#define HILAT_STIM_DONE (1u << 1)
#define HILAT_STIM_LATE (1u << 2)

/* Measurement engine (docs/engine.md). Kinds: 0 stim_to_isr, 1 stim_to_task, 2 isr_to_task. */
#define HILAT_ENGINE_KINDS 3u
#define HILAT_ENGINE_HDR_BINS 2304u                       /* HdrHistogram bins 0..2303 */
#define HILAT_ENGINE_OVERFLOW_BIN HILAT_ENGINE_HDR_BINS    /* values >= 2**24 ticks */
#define HILAT_ENGINE_BINS_PER_HISTOGRAM (HILAT_ENGINE_HDR_BINS + 1u) /* ENGINE_STATS bins (soc.h's
                                                                     * HILAT_ENGINE_BINS) */
/* ENGINE_CONFIG flags. */
#define HILAT_ENGINE_ENABLE (1u << 0)
#define HILAT_ENGINE_RAW (1u << 1)             /* raw edges (EVENTS) too */
#define HILAT_ENGINE_TRIGGER_ON_LATE (1u << 2) /* trigger also on a late response */
#define HILAT_ENGINE_NO_TAG 0xFFu              /* tag_channel: no tag */
#define HILAT_ENGINE_NEVER 0xFFFFFFFFu         /* threshold: no outlier records */
#define HILAT_ENGINE_TRIGGER_ISR 0u
#define HILAT_ENGINE_TRIGGER_TASK 1u
/* ENGINE_BINS entry head: bits 0-1 type, bits 2-3 kind, bit 4 tag. */
#define HILAT_ENGINE_ENTRY_BIN 0u
#define HILAT_ENGINE_ENTRY_CLOSE 1u
#define HILAT_ENGINE_BINS_MAX_ENTRY 18u /* head + uleb128 of a u32, of a bin, of a u64 */
/* ENGINE_OUTLIERS records: start:u64 flags:u8 values:3 x u32. */
#define HILAT_ENGINE_OUTLIER_SIZE 21u
#define HILAT_ENGINE_OUTLIERS_PER_FRAME ((HILAT_MAX_PAYLOAD - HILAT_HEADER_SIZE) / HILAT_ENGINE_OUTLIER_SIZE) /* 11 */
#define HILAT_OUTLIER_TAG_AT_START (1u << 0)
#define HILAT_OUTLIER_TAG_IN_WINDOW (1u << 1)
#define HILAT_OUTLIER_MISS 0xFFFFFFFFu  /* value: no response */
#define HILAT_OUTLIER_BELOW 0xFFFFFFFEu /* value: below range */
/* ENGINE_STATS state bits, and min while a count is 0. */
#define HILAT_ENGINE_STATE_ENABLED (1u << 0)
#define HILAT_ENGINE_STATE_FLUSHED (1u << 1)
#define HILAT_ENGINE_MIN_NONE 0xFFFFFFFFu

/* Result codes (negative: the frame is refused). */
#define HILAT_OK 0
#define HILAT_ERR_COBS (-1)         /* corrupt: COBS decoding failed (or empty frame) */
#define HILAT_ERR_SHORT (-2)        /* corrupt: fewer than HILAT_MIN_FRAME decoded bytes */
#define HILAT_ERR_TOO_LONG (-3)     /* corrupt: more than HILAT_MAX_DECODED decoded bytes */
#define HILAT_ERR_CRC (-4)          /* corrupt: CRC mismatch */
#define HILAT_ERR_VERSION (-5)      /* another protocol version (header filled in) */
#define HILAT_ERR_UNKNOWN_TYPE (-6) /* not a host -> rig command (header filled in) */
#define HILAT_ERR_BAD_LENGTH (-7)   /* body length wrong for the type (header filled in) */
#define HILAT_ERR_RANGE (-8)        /* CAPTURE_CONFIG n > HILAT_MAX_CHANNELS (header filled in); an
                                     * ENGINE_BINS entry the encoder cannot write */
/* Corrupt frames (counted, never interpreted; no header available). */
#define HILAT_IS_CORRUPT(err) ((err) <= HILAT_ERR_COBS && (err) >= HILAT_ERR_CRC)

/* ---- primitives ---- */

/* CRC-32/ISO-HDLC (zlib.crc32). */
uint32_t hilat_crc32(const uint8_t *data, size_t len);
/* Incremental form: crc = hilat_crc32_update(0, a, n); crc = hilat_crc32_update(crc, b, m). */
uint32_t hilat_crc32_update(uint32_t crc, const uint8_t *data, size_t len);

/* COBS-encode len bytes into dst (no delimiter). Returns the encoded length, or 0 if it would
 * exceed cap (HILAT_COBS_MAX_ENCODED(len) always suffices). src and dst must not overlap. */
size_t hilat_cobs_encode(const uint8_t *src, size_t len, uint8_t *dst, size_t cap);
/* COBS-decode len bytes (no delimiter) into dst. On success stores the decoded length in *out_len
 * and returns HILAT_OK; returns HILAT_ERR_COBS (a 0x00 byte, a truncated block, or len = 0) or
 * HILAT_ERR_TOO_LONG (output larger than cap). dst may equal src (in-place decoding). */
int hilat_cobs_decode(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, size_t *out_len);

/* ---- rig -> host: frame builder ---- */

typedef struct {
    uint8_t buf[HILAT_MAX_DECODED]; /* payload, then room for the CRC */
    size_t len;                     /* payload bytes so far (header included) */
    uint64_t last;                  /* EVENTS: timestamp of the last record (base at first) */
    uint16_t records;               /* EVENTS: records in this frame */
    uint8_t mask_bytes;             /* EVENTS: bytes per channel mask (1 or 2) */
    uint8_t fraction_bytes;         /* EVENTS: bytes of each record's fraction (0 .. 8) */
} hilat_frame_t;

/* Start a frame: writes the header (version, type, seq). */
void hilat_frame_begin(hilat_frame_t *f, uint8_t type, uint16_t seq);
/* Bytes the payload can still take. */
size_t hilat_frame_remaining(const hilat_frame_t *f);
/* Appenders: return 1 if appended, 0 if it does not fit (the frame is then unchanged). */
int hilat_frame_put_u8(hilat_frame_t *f, uint8_t v);
int hilat_frame_put_u16(hilat_frame_t *f, uint16_t v);
int hilat_frame_put_u32(hilat_frame_t *f, uint32_t v);
int hilat_frame_put_u64(hilat_frame_t *f, uint64_t v);
int hilat_frame_put_uleb128(hilat_frame_t *f, uint64_t v);
int hilat_frame_put_bytes(hilat_frame_t *f, const uint8_t *data, size_t n);
/* str: length:u8 then the bytes; 0 if n > 255 or it does not fit. */
int hilat_frame_put_strn(hilat_frame_t *f, const char *s, size_t n);
int hilat_frame_put_str(hilat_frame_t *f, const char *s); /* NUL-terminated */
/* Bytes taken by v as uleb128 (1..10). */
size_t hilat_uleb128_size(uint64_t v);
/* Append the CRC and write COBS(payload || crc32) 0x00 to out. Returns the wire length (delimiter
 * included, at most HILAT_MAX_WIRE), or 0 if cap is too small. The frame may be finished again. */
size_t hilat_frame_finish(hilat_frame_t *f, uint8_t *out, size_t cap);

/* ---- rig -> host: messages (each begins the frame; returns 1, or 0 if it does not fit) ---- */

typedef struct {
    uint8_t version;
    uint32_t ts_hz;
    uint32_t sys_hz;
    uint8_t n_stimulus;
    uint8_t n_inputs;
    uint16_t fifo_depth;
    uint8_t pin_to_stamp_delay;
    uint32_t capabilities;
    uint16_t min_interval; /* shortest stimulus interval, ticks */
    uint8_t glitch_max;    /* longest glitch filter, ticks */
    uint32_t start_margin; /* a START closer than this to now is refused as late, ticks */
    uint8_t samples_per_tick; /* samples of each DUT input a tick (1, 2 or 4; docs/subtick.md) */
    const char *firmware;  /* NUL-terminated; NULL = empty */
    const char *gateware;
    /* Every channel in order as "name:role" items, comma separated (soc.h's HILAT_CHANNELS): sent
     * as n_stimulus + n_inputs pairs of str; the encoder refuses a table of another length. */
    const char *channels;
    /* The rate the UART was built for (soc.h's HILAT_UART_BAUDRATE; 0: no serial line), after the
     * table: the host opens the port at a board's rate and says which one it got (docs/boards.md). */
    uint32_t uart_baud;
    /* Protocol 4: after uart_baud, ethernet:u8 (0: none) and, when 1, the tail below. */
    uint8_t ethernet;
    uint32_t eth_ip;                      /* numeric IPv4 (192.168.1.50 = 0xC0A80132) */
    uint8_t eth_mac[HILAT_MAC_BYTES];     /* wire order */
    uint16_t eth_command_port;
    uint16_t eth_stream_port;
    uint8_t eth_record_words;             /* 32-bit words a stream record takes */
    uint16_t eth_max_records;             /* records a stream datagram holds at most */
    /* Protocol 5, last: the first tdc_inputs DUT inputs have a TDC of tdc_taps taps (soc.h's
     * HILAT_TDC_INPUTS, HILAT_TDC_TAPS; 0 without), 8 bits of code each in a record's fraction. */
    uint8_t tdc_inputs;
    uint16_t tdc_taps;
} hilat_identify_t;

/* STREAM_STATUS (docs/ethernet.md): the settings of the last STREAM_CONFIG (the destination as
 * resolved) and the counters. */
typedef struct {
    uint8_t enabled;
    uint8_t link;         /* HILAT_STREAM_LINK_UP */
    uint32_t session;
    uint32_t dst_ip;
    uint16_t dst_port;
    uint16_t flush_us;
    uint16_t heartbeat_ms;
    uint32_t datagrams;   /* stream datagrams sent since the restart, heartbeats included */
    uint64_t records;     /* records sent since the restart */
    uint32_t rx_frames;   /* Ethernet frames received since reset */
    uint32_t command_dropped; /* command datagrams dropped (receive buffer full) */
} hilat_stream_status_t;

typedef struct {
    uint32_t records_sent;
    uint32_t events_sent;
    uint32_t frames_sent;
    uint8_t overflow;
    uint8_t n; /* <= HILAT_MAX_CHANNELS */
    uint32_t dropped[HILAT_MAX_CHANNELS];
    uint8_t stim_n; /* <= HILAT_MAX_STIMULUS */
    uint8_t stim_status[HILAT_MAX_STIMULUS];
    /* Pulses each stimulus channel fired, after the status bytes: fired_n is stim_n, or 0 for the
     * older body without them (the test vectors of older rigs); any other value is refused. */
    uint8_t fired_n;
    uint32_t fired[HILAT_MAX_STIMULUS];
} hilat_status_t;

int hilat_msg_identify(hilat_frame_t *f, uint16_t seq, const hilat_identify_t *m);
int hilat_msg_overflow(hilat_frame_t *f, uint16_t seq, uint64_t timestamp, uint16_t channels);
int hilat_msg_status(hilat_frame_t *f, uint16_t seq, const hilat_status_t *m);
/* message: NUL-terminated, NULL = empty. */
int hilat_msg_ack(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint8_t code, const char *message);
int hilat_msg_time(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint64_t now);
/* STREAM_STATUS answering the STREAM_STATUS_REQ of command_seq (38-byte body: always fits). */
int hilat_msg_stream_status(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, const hilat_stream_status_t *m);

/* EVENTS, built incrementally. The delta of a record is (timestamp - previous) mod 2**64, previous
 * being base for the first record: base = the first record's timestamp gives a 1-byte delta; a
 * timestamp that wrapped past 2**64 still round-trips. Masks take mask_bytes (1 or 2) bytes each:
 * hilat_mask_bytes(n_channels); the fraction (the capture record's field: the inputs' sub-tick
 * positions or TDC codes) fraction_bytes (0 .. 8), little-endian: hilat_fraction_bytes(bits). */
void hilat_events_begin(hilat_frame_t *f, uint16_t seq, uint64_t base, uint8_t mask_bytes, uint8_t fraction_bytes);
/* Returns 1 if added, 0 if the record does not fit (frame unchanged): finish and send this frame,
 * then begin a new one. A record always fits in a frame just begun. */
int hilat_events_add(hilat_frame_t *f, uint64_t timestamp, uint16_t channels, uint16_t levels, uint64_t fraction);
#define hilat_mask_bytes(n_channels) ((uint8_t)((n_channels) > 8u ? 2u : 1u))
#define hilat_fraction_bytes(bits) ((uint8_t)(((bits) + 7u) / 8u))

/* ---- rig -> host: the measurement engine ---- */

/* The samples of one kind and tag; min is HILAT_ENGINE_MIN_NONE while the count is 0. Ticks. */
typedef struct {
    uint64_t count;
    uint32_t min;
    uint32_t max;
    uint64_t sum;
} hilat_engine_tag_stats_t;

/* One kind's run totals; tags[0]: untagged samples, tags[1]: tagged. */
typedef struct {
    uint64_t misses;
    uint64_t duplicates;
    uint64_t below;
    hilat_engine_tag_stats_t tags[2];
} hilat_engine_kind_stats_t;

typedef struct {
    uint8_t state; /* HILAT_ENGINE_STATE_* */
    uint64_t samples;
    uint32_t samples_lost;
    uint32_t bins_lost;
    uint32_t outliers_lost;
    uint8_t trigger_delay;      /* ticks from the threshold crossing to the trigger pin */
    uint8_t min_spacing;        /* shortest stimulus spacing (and deadline), ticks */
    uint8_t interval_shift_min; /* smallest interval_shift */
    uint16_t bins;              /* bins per kind and tag: HILAT_ENGINE_BINS_PER_HISTOGRAM */
    hilat_engine_kind_stats_t kinds[HILAT_ENGINE_KINDS];
} hilat_engine_stats_t;

/* ENGINE_STATS answering the ENGINE_STATS_REQ of command_seq (244-byte body: always fits). */
int hilat_msg_engine_stats(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, const hilat_engine_stats_t *m);

/* ENGINE_BINS, built incrementally like EVENTS; f->records counts the entries. The adders return 1
 * if the entry was added; 0 if it does not fit (frame unchanged): finish and send this frame, begin
 * another and add it there (an entry always fits a frame just begun); HILAT_ERR_RANGE if it cannot
 * be encoded (kind >= HILAT_ENGINE_KINDS, tag > 1, bin > HILAT_ENGINE_OVERFLOW_BIN): frame
 * unchanged, the entry is to be dropped (and counted). interval: start tick >> shift, low 32 bits. */
void hilat_engine_bins_begin(hilat_frame_t *f, uint16_t seq);
int hilat_engine_bins_add_bin(hilat_frame_t *f, uint8_t kind, uint8_t tag, uint32_t interval, uint16_t bin,
                              uint64_t count);
int hilat_engine_bins_add_close(hilat_frame_t *f, uint8_t kind, uint32_t interval);

/* ENGINE_OUTLIERS: up to HILAT_ENGINE_OUTLIERS_PER_FRAME records a frame; f->records counts them.
 * add returns 1 if added, 0 if the frame is full (unchanged). values: per kind, ticks or
 * HILAT_OUTLIER_MISS / HILAT_OUTLIER_BELOW; flags: HILAT_OUTLIER_TAG_*. */
void hilat_engine_outliers_begin(hilat_frame_t *f, uint16_t seq);
int hilat_engine_outliers_add(hilat_frame_t *f, uint64_t start, uint8_t flags,
                              const uint32_t values[HILAT_ENGINE_KINDS]);

/* ---- host -> rig: commands ---- */

typedef struct {
    uint8_t channel;
    uint8_t mode;
    uint8_t invert;
    uint32_t width;
    uint32_t period;
    uint32_t jitter;
    uint32_t probability;
    uint16_t burst_count;
    uint32_t burst_spacing;
    uint32_t count;
    uint32_t seed;
} hilat_stim_config_t;

typedef struct {
    uint8_t n;
    uint8_t flags[HILAT_MAX_CHANNELS];
    uint8_t glitch[HILAT_MAX_CHANNELS];
} hilat_capture_config_t;

/* ENGINE_CONFIG. Levels: the pin level after the active edge (1 rise, 0 fall). */
typedef struct {
    uint8_t flags; /* HILAT_ENGINE_ENABLE, _RAW, _TRIGGER_ON_LATE */
    uint8_t start_channel;
    uint8_t start_level;
    uint8_t isr_channel;
    uint8_t isr_level;
    uint8_t task_channel;
    uint8_t task_level;
    uint8_t tag_channel; /* HILAT_ENGINE_NO_TAG: none */
    uint8_t tag_level;
    uint32_t deadline;      /* ticks, 0: none */
    uint16_t offset;        /* ticks, subtracted from both stimulus latencies */
    uint8_t interval_shift; /* interval boundaries at multiples of 2**shift ticks */
    uint32_t threshold[HILAT_ENGINE_KINDS]; /* outlier thresholds, ticks; HILAT_ENGINE_NEVER: none */
    uint8_t trigger_response;   /* HILAT_ENGINE_TRIGGER_ISR or _TASK */
    uint32_t trigger_threshold; /* ticks, 0: no trigger */
    uint16_t trigger_width;     /* ticks */
} hilat_engine_config_t;

/* STREAM_CONFIG (docs/ethernet.md). dst_ip / dst_port 0: the command datagram's source. */
typedef struct {
    uint8_t enable;
    uint32_t session;
    uint32_t dst_ip;  /* numeric IPv4 */
    uint16_t dst_port;
    uint16_t flush_us;     /* >= 1 */
    uint16_t heartbeat_ms; /* 0: no heartbeat */
} hilat_stream_config_t;

/* NET_CONFIG: the rig's address until reset. */
typedef struct {
    uint32_t ip;                      /* numeric IPv4 */
    uint8_t mac[HILAT_MAC_BYTES];     /* wire order */
} hilat_net_config_t;

typedef struct {
    uint8_t version; /* header */
    uint8_t type;    /* header: HILAT_MSG_* */
    uint16_t seq;    /* header */
    uint32_t crc;    /* the frame's CRC (a repeated command has the same seq and CRC) */
    union {
        struct {
            uint8_t version;
        } hello;
        hilat_stim_config_t stim_config;
        hilat_capture_config_t capture_config;
        struct {
            uint8_t channels;
            uint8_t at_time;
            uint64_t start;
        } start;
        struct {
            uint8_t channels;
        } stop;
        hilat_engine_config_t engine_config;
        hilat_stream_config_t stream_config;
        hilat_net_config_t net_config;
    } u;
} hilat_command_t;

/* Parse one received wire frame (COBS bytes without the 0x00 delimiter; len <= HILAT_MAX_ENCODED
 * for a valid frame). Returns HILAT_OK with *cmd filled, or a HILAT_ERR_* code. The header fields
 * (version, type, seq) and crc are filled whenever the CRC matched, so an ACK can name the refused
 * seq. */
int hilat_parse_command(const uint8_t *wire, size_t len, hilat_command_t *cmd);

/* Streaming receiver: bounded buffer, overlong frames counted and discarded. */
typedef struct {
    uint8_t buf[HILAT_MAX_ENCODED];
    size_t len;
    uint8_t discarding;    /* the current frame overflowed buf */
    uint32_t overlong;     /* frames discarded because they exceeded HILAT_MAX_ENCODED bytes */
    uint32_t overlong_bytes; /* bytes (delimiters included) of those frames */
} hilat_rx_t;

void hilat_rx_init(hilat_rx_t *rx);
/* Feed one byte. Returns the length of a complete frame now in rx->buf (COBS bytes without the
 * delimiter; valid until the next call) when byte is the 0x00 ending a non-empty frame of at most
 * HILAT_MAX_ENCODED bytes, else 0. Empty frames (consecutive 0x00) are skipped silently. */
size_t hilat_rx_feed(hilat_rx_t *rx, uint8_t byte);

#endif /* HILAT_PROTOCOL_H */
