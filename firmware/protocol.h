/*
 * hilat rig wire protocol, version 2 (docs/protocol.md).
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

#define HILAT_PROTOCOL_VERSION 2u
#define HILAT_PROTOCOL_VERSION_TEXT "2"

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
/* EVENTS: the body of an empty frame (base:u64 mask_bytes:u8) and the largest record (10-byte
 * uleb128 + two 2-byte masks). */
#define HILAT_EVENTS_EMPTY (HILAT_HEADER_SIZE + 9u)
#define HILAT_EVENTS_MAX_RECORD 14u

/* Message types. Host -> rig (>= 0x80). */
#define HILAT_MSG_HELLO 0x81u
#define HILAT_MSG_STIM_CONFIG 0x82u
#define HILAT_MSG_CAPTURE_CONFIG 0x83u
#define HILAT_MSG_START 0x84u
#define HILAT_MSG_STOP 0x85u
#define HILAT_MSG_STATUS_REQ 0x86u
#define HILAT_MSG_TIME_REQ 0x87u
/* Rig -> host (< 0x80). */
#define HILAT_MSG_IDENTIFY 0x01u
#define HILAT_MSG_EVENTS 0x02u
#define HILAT_MSG_OVERFLOW 0x03u
#define HILAT_MSG_STATUS 0x04u
#define HILAT_MSG_ACK 0x05u
#define HILAT_MSG_TIME 0x06u

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

/* CAPTURE_CONFIG per-channel flags. */
#define HILAT_CAPTURE_ENABLE (1u << 0)
#define HILAT_CAPTURE_RISE (1u << 1)
#define HILAT_CAPTURE_FALL (1u << 2)

/* STATUS per-stimulus-channel bits. */
#define HILAT_STIM_RUNNING (1u << 0)
#define HILAT_STIM_DONE (1u << 1)
#define HILAT_STIM_LATE (1u << 2)

/* Result codes (negative: the frame is refused). */
#define HILAT_OK 0
#define HILAT_ERR_COBS (-1)         /* corrupt: COBS decoding failed (or empty frame) */
#define HILAT_ERR_SHORT (-2)        /* corrupt: fewer than HILAT_MIN_FRAME decoded bytes */
#define HILAT_ERR_TOO_LONG (-3)     /* corrupt: more than HILAT_MAX_DECODED decoded bytes */
#define HILAT_ERR_CRC (-4)          /* corrupt: CRC mismatch */
#define HILAT_ERR_VERSION (-5)      /* another protocol version (header filled in) */
#define HILAT_ERR_UNKNOWN_TYPE (-6) /* not a host -> rig command (header filled in) */
#define HILAT_ERR_BAD_LENGTH (-7)   /* body length wrong for the type (header filled in) */
#define HILAT_ERR_RANGE (-8)        /* CAPTURE_CONFIG n > HILAT_MAX_CHANNELS (header filled in) */
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
    const char *firmware;  /* NUL-terminated; NULL = empty */
    const char *gateware;
    /* Every channel in order as "name:role" items, comma separated (soc.h's HILAT_CHANNELS): sent
     * as n_stimulus + n_inputs pairs of str; the encoder refuses a table of another length. */
    const char *channels;
} hilat_identify_t;

typedef struct {
    uint32_t records_sent;
    uint32_t events_sent;
    uint32_t frames_sent;
    uint8_t overflow;
    uint8_t n; /* <= HILAT_MAX_CHANNELS */
    uint32_t dropped[HILAT_MAX_CHANNELS];
    uint8_t stim_n; /* <= HILAT_MAX_STIMULUS */
    uint8_t stim_status[HILAT_MAX_STIMULUS];
} hilat_status_t;

int hilat_msg_identify(hilat_frame_t *f, uint16_t seq, const hilat_identify_t *m);
int hilat_msg_overflow(hilat_frame_t *f, uint16_t seq, uint64_t timestamp, uint16_t channels);
int hilat_msg_status(hilat_frame_t *f, uint16_t seq, const hilat_status_t *m);
/* message: NUL-terminated, NULL = empty. */
int hilat_msg_ack(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint8_t code, const char *message);
int hilat_msg_time(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint64_t now);

/* EVENTS, built incrementally. The delta of a record is (timestamp - previous) mod 2**64, previous
 * being base for the first record: base = the first record's timestamp gives a 1-byte delta; a
 * timestamp that wrapped past 2**64 still round-trips. Masks take mask_bytes (1 or 2) bytes each:
 * hilat_mask_bytes(n_channels). */
void hilat_events_begin(hilat_frame_t *f, uint16_t seq, uint64_t base, uint8_t mask_bytes);
/* Returns 1 if added, 0 if the record does not fit (frame unchanged): finish and send this frame,
 * then begin a new one. A record always fits in a frame just begun. */
int hilat_events_add(hilat_frame_t *f, uint64_t timestamp, uint16_t channels, uint16_t levels);
#define hilat_mask_bytes(n_channels) ((uint8_t)((n_channels) > 8u ? 2u : 1u))

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

typedef struct {
    uint8_t version; /* header */
    uint8_t type;    /* header: HILAT_MSG_* */
    uint16_t seq;    /* header */
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
    } u;
} hilat_command_t;

/* Parse one received wire frame (COBS bytes without the 0x00 delimiter; len <= HILAT_MAX_ENCODED
 * for a valid frame). Returns HILAT_OK with *cmd filled, or a HILAT_ERR_* code. The header fields
 * (version, type, seq) are filled whenever the CRC matched, so an ACK can name the refused seq. */
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
