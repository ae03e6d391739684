/*
 * libFuzzer target for the rig's command parser (firmware/protocol.c): the bytes a host, or a noisy
 * line, sends to the rig. Built for the host with AddressSanitizer and UndefinedBehaviorSanitizer
 * (scripts/fuzz-firmware.sh; a short run in tests/firmware/test_fuzz_parser.py).
 *
 * Each input goes three ways, with an oracle on each, so a wrong answer is found as well as a crash:
 *  1. hilat_parse_command on the whole input as one frame. A command it accepts is built again from
 *     the parsed fields with the firmware's own frame builder: the payload must be the decoded input
 *     byte for byte (nothing misread, nothing ignored), and its CRC must be the one received (and
 *     the one the parser reports, the repeated-command rule's key).
 *  2. The input as a byte stream through hilat_rx_feed: every frame it yields is at most
 *     HILAT_MAX_ENCODED bytes, equals the bytes between two delimiters, and is parsed as in 1.
 *  3. The input as a payload (header + body) sent correctly: with its CRC, COBS-encoded. Mutations
 *     seldom keep a CRC valid, so without this only the seeds would reach the body parser.
 *  4. COBS: whatever hilat_cobs_decode accepts, hilat_cobs_encode encodes back into something that
 *     decodes to the same bytes, within HILAT_COBS_MAX_ENCODED; into a buffer one byte too small it
 *     is refused as too long.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"

#define CHECK(cond)            \
    do {                       \
        if (!(cond))           \
            __builtin_trap();  \
    } while (0)

/* The payload (header + body) of a parsed command, built with the frame builder. */
static void build_payload(const hilat_command_t *c, hilat_frame_t *f)
{
    hilat_frame_begin(f, c->type, c->seq);
    switch (c->type) {
    case HILAT_MSG_HELLO:
        CHECK(hilat_frame_put_u8(f, c->u.hello.version));
        break;
    case HILAT_MSG_STIM_CONFIG: {
        const hilat_stim_config_t *s = &c->u.stim_config;
        CHECK(hilat_frame_put_u8(f, s->channel) && hilat_frame_put_u8(f, s->mode) && hilat_frame_put_u8(f, s->invert)
              && hilat_frame_put_u32(f, s->width) && hilat_frame_put_u32(f, s->period)
              && hilat_frame_put_u32(f, s->jitter) && hilat_frame_put_u32(f, s->probability)
              && hilat_frame_put_u16(f, s->burst_count) && hilat_frame_put_u32(f, s->burst_spacing)
              && hilat_frame_put_u32(f, s->count) && hilat_frame_put_u32(f, s->seed));
        break;
    }
    case HILAT_MSG_CAPTURE_CONFIG: {
        const hilat_capture_config_t *cc = &c->u.capture_config;
        CHECK(cc->n <= HILAT_MAX_CHANNELS);
        CHECK(hilat_frame_put_u8(f, cc->n));
        for (unsigned i = 0; i < cc->n; i++)
            CHECK(hilat_frame_put_u8(f, cc->flags[i]) && hilat_frame_put_u8(f, cc->glitch[i]));
        break;
    }
    case HILAT_MSG_START:
        CHECK(hilat_frame_put_u8(f, c->u.start.channels) && hilat_frame_put_u8(f, c->u.start.at_time)
              && hilat_frame_put_u64(f, c->u.start.start));
        break;
    case HILAT_MSG_STOP:
        CHECK(hilat_frame_put_u8(f, c->u.stop.channels));
        break;
    case HILAT_MSG_ENGINE_CONFIG: {
        const hilat_engine_config_t *e = &c->u.engine_config;
        CHECK(hilat_frame_put_u8(f, e->flags) && hilat_frame_put_u8(f, e->start_channel)
              && hilat_frame_put_u8(f, e->start_level) && hilat_frame_put_u8(f, e->isr_channel)
              && hilat_frame_put_u8(f, e->isr_level) && hilat_frame_put_u8(f, e->task_channel)
              && hilat_frame_put_u8(f, e->task_level) && hilat_frame_put_u8(f, e->tag_channel)
              && hilat_frame_put_u8(f, e->tag_level) && hilat_frame_put_u32(f, e->deadline)
              && hilat_frame_put_u16(f, e->offset) && hilat_frame_put_u8(f, e->interval_shift));
        for (unsigned k = 0; k < HILAT_ENGINE_KINDS; k++)
            CHECK(hilat_frame_put_u32(f, e->threshold[k]));
        CHECK(hilat_frame_put_u8(f, e->trigger_response) && hilat_frame_put_u32(f, e->trigger_threshold)
              && hilat_frame_put_u16(f, e->trigger_width));
        break;
    }
    case HILAT_MSG_STREAM_CONFIG: {
        const hilat_stream_config_t *s = &c->u.stream_config;
        CHECK(hilat_frame_put_u8(f, s->enable) && hilat_frame_put_u32(f, s->session)
              && hilat_frame_put_u32(f, s->dst_ip) && hilat_frame_put_u16(f, s->dst_port)
              && hilat_frame_put_u16(f, s->flush_us) && hilat_frame_put_u16(f, s->heartbeat_ms));
        break;
    }
    case HILAT_MSG_NET_CONFIG:
        CHECK(hilat_frame_put_u32(f, c->u.net_config.ip)
              && hilat_frame_put_bytes(f, c->u.net_config.mac, HILAT_MAC_BYTES));
        break;
    case HILAT_MSG_STATUS_REQ:
    case HILAT_MSG_TIME_REQ:
    case HILAT_MSG_ENGINE_STATS_REQ:
    case HILAT_MSG_ENGINE_FLUSH:
    case HILAT_MSG_STREAM_STATUS_REQ:
        break;
    default:
        CHECK(0); /* the parser accepted a type that is not a command */
    }
}

static void parse_and_check(const uint8_t *wire, size_t len)
{
    hilat_command_t cmd;
    uint8_t decoded[HILAT_MAX_DECODED];
    size_t n;
    int r;

    memset(&cmd, 0xA5, sizeof cmd);
    r = hilat_parse_command(wire, len, &cmd);
    CHECK(r <= HILAT_OK && r >= HILAT_ERR_RANGE);
    if (r != HILAT_OK) {
        /* Refused frames: only the corrupt ones lack a header; the others carry the received one. */
        if (!HILAT_IS_CORRUPT(r) && r != HILAT_ERR_TOO_LONG) {
            CHECK(hilat_cobs_decode(wire, len, decoded, sizeof decoded, &n) == HILAT_OK);
            CHECK(cmd.version == decoded[0] && cmd.type == decoded[1]);
            CHECK(cmd.seq == (uint16_t)(decoded[2] | decoded[3] << 8));
            CHECK((r == HILAT_ERR_VERSION) == (decoded[0] != HILAT_PROTOCOL_VERSION));
        }
        return;
    }
    CHECK(len <= HILAT_MAX_ENCODED);
    CHECK(cmd.version == HILAT_PROTOCOL_VERSION && cmd.type >= 0x80u);
    CHECK(hilat_cobs_decode(wire, len, decoded, sizeof decoded, &n) == HILAT_OK);
    CHECK(n >= HILAT_MIN_FRAME);

    hilat_frame_t f;
    build_payload(&cmd, &f);
    CHECK(f.len + HILAT_CRC_SIZE == n);
    CHECK(memcmp(f.buf, decoded, f.len) == 0);
    uint32_t crc = hilat_crc32(f.buf, f.len);
    CHECK(decoded[f.len] == (uint8_t)crc && decoded[f.len + 1] == (uint8_t)(crc >> 8)
          && decoded[f.len + 2] == (uint8_t)(crc >> 16) && decoded[f.len + 3] == (uint8_t)(crc >> 24));
    CHECK(cmd.crc == crc);
}

static void check_stream(const uint8_t *data, size_t size)
{
    hilat_rx_t rx;
    size_t start = 0; /* first byte of the current frame in data */

    hilat_rx_init(&rx);
    for (size_t i = 0; i < size; i++) {
        size_t n = hilat_rx_feed(&rx, data[i]);
        if (data[i] != 0) {
            CHECK(n == 0);
            continue;
        }
        if (n) {
            CHECK(n <= HILAT_MAX_ENCODED && n == i - start);
            CHECK(memcmp(rx.buf, data + start, n) == 0);
            parse_and_check(rx.buf, n);
        } else {
            CHECK(i == start || i - start > HILAT_MAX_ENCODED); /* empty or overlong */
        }
        start = i + 1;
    }
}

static void check_payload(const uint8_t *payload, size_t size)
{
    uint8_t frame[HILAT_MAX_DECODED], wire[HILAT_MAX_WIRE];
    size_t n;

    if (size > HILAT_MAX_PAYLOAD)
        return;
    memcpy(frame, payload, size);
    uint32_t crc = hilat_crc32(frame, size);
    for (unsigned i = 0; i < 4; i++)
        frame[size + i] = (uint8_t)(crc >> (8 * i));
    n = hilat_cobs_encode(frame, size + HILAT_CRC_SIZE, wire, sizeof wire);
    CHECK(n > 0 && n <= HILAT_MAX_ENCODED);
    parse_and_check(wire, n);
}

static void check_cobs(const uint8_t *data, size_t size)
{
    static uint8_t decoded[1u << 16], encoded[(1u << 16) + (1u << 16) / 254u + 2u], again[1u << 16];
    size_t n, m, k;

    if (size > sizeof decoded)
        return;
    if (hilat_cobs_decode(data, size, decoded, sizeof decoded, &n) != HILAT_OK)
        return;
    CHECK(n < size || size == 0);
    m = hilat_cobs_encode(decoded, n, encoded, sizeof encoded);
    CHECK(m > 0 && m <= HILAT_COBS_MAX_ENCODED(n));
    CHECK(memchr(encoded, 0, m) == NULL);
    CHECK(hilat_cobs_decode(encoded, m, again, sizeof again, &k) == HILAT_OK);
    CHECK(k == n && memcmp(again, decoded, n) == 0);
    /* Into a buffer too small by one: refused as too long, never written past. */
    if (n > 0) {
        uint8_t *small = malloc(n - 1 ? n - 1 : 1);
        if (small) {
            CHECK(hilat_cobs_decode(data, size, small, n - 1, &k) == HILAT_ERR_TOO_LONG);
            free(small);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A copy of exactly `size` bytes, so ASan sees any read past the input. */
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy)
        return 0;
    memcpy(copy, data, size);
    parse_and_check(copy, size);
    check_stream(copy, size);
    check_payload(copy, size);
    check_cobs(copy, size);
    free(copy);
    return 0;
}
