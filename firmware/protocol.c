/* hilat rig wire protocol, version 4: see protocol.h and docs/protocol.md. */
#include "protocol.h"

/* No <string.h>: bare cross toolchains (riscv64-unknown-elf-gcc without a libc) lack it. */
static void copy_bytes(uint8_t *dst, const uint8_t *src, size_t n)
{
    while (n--)
        *dst++ = *src++;
}

/* ---- CRC-32/ISO-HDLC (reflected, poly 0xEDB88320, init and xorout 0xFFFFFFFF) ---- */

static const uint32_t crc_table[256] = {
    0x00000000u, 0x77073096u, 0xee0e612cu, 0x990951bau, 0x076dc419u, 0x706af48fu,
    0xe963a535u, 0x9e6495a3u, 0x0edb8832u, 0x79dcb8a4u, 0xe0d5e91eu, 0x97d2d988u,
    0x09b64c2bu, 0x7eb17cbdu, 0xe7b82d07u, 0x90bf1d91u, 0x1db71064u, 0x6ab020f2u,
    0xf3b97148u, 0x84be41deu, 0x1adad47du, 0x6ddde4ebu, 0xf4d4b551u, 0x83d385c7u,
    0x136c9856u, 0x646ba8c0u, 0xfd62f97au, 0x8a65c9ecu, 0x14015c4fu, 0x63066cd9u,
    0xfa0f3d63u, 0x8d080df5u, 0x3b6e20c8u, 0x4c69105eu, 0xd56041e4u, 0xa2677172u,
    0x3c03e4d1u, 0x4b04d447u, 0xd20d85fdu, 0xa50ab56bu, 0x35b5a8fau, 0x42b2986cu,
    0xdbbbc9d6u, 0xacbcf940u, 0x32d86ce3u, 0x45df5c75u, 0xdcd60dcfu, 0xabd13d59u,
    0x26d930acu, 0x51de003au, 0xc8d75180u, 0xbfd06116u, 0x21b4f4b5u, 0x56b3c423u,
    0xcfba9599u, 0xb8bda50fu, 0x2802b89eu, 0x5f058808u, 0xc60cd9b2u, 0xb10be924u,
    0x2f6f7c87u, 0x58684c11u, 0xc1611dabu, 0xb6662d3du, 0x76dc4190u, 0x01db7106u,
    0x98d220bcu, 0xefd5102au, 0x71b18589u, 0x06b6b51fu, 0x9fbfe4a5u, 0xe8b8d433u,
    0x7807c9a2u, 0x0f00f934u, 0x9609a88eu, 0xe10e9818u, 0x7f6a0dbbu, 0x086d3d2du,
    0x91646c97u, 0xe6635c01u, 0x6b6b51f4u, 0x1c6c6162u, 0x856530d8u, 0xf262004eu,
    0x6c0695edu, 0x1b01a57bu, 0x8208f4c1u, 0xf50fc457u, 0x65b0d9c6u, 0x12b7e950u,
    0x8bbeb8eau, 0xfcb9887cu, 0x62dd1ddfu, 0x15da2d49u, 0x8cd37cf3u, 0xfbd44c65u,
    0x4db26158u, 0x3ab551ceu, 0xa3bc0074u, 0xd4bb30e2u, 0x4adfa541u, 0x3dd895d7u,
    0xa4d1c46du, 0xd3d6f4fbu, 0x4369e96au, 0x346ed9fcu, 0xad678846u, 0xda60b8d0u,
    0x44042d73u, 0x33031de5u, 0xaa0a4c5fu, 0xdd0d7cc9u, 0x5005713cu, 0x270241aau,
    0xbe0b1010u, 0xc90c2086u, 0x5768b525u, 0x206f85b3u, 0xb966d409u, 0xce61e49fu,
    0x5edef90eu, 0x29d9c998u, 0xb0d09822u, 0xc7d7a8b4u, 0x59b33d17u, 0x2eb40d81u,
    0xb7bd5c3bu, 0xc0ba6cadu, 0xedb88320u, 0x9abfb3b6u, 0x03b6e20cu, 0x74b1d29au,
    0xead54739u, 0x9dd277afu, 0x04db2615u, 0x73dc1683u, 0xe3630b12u, 0x94643b84u,
    0x0d6d6a3eu, 0x7a6a5aa8u, 0xe40ecf0bu, 0x9309ff9du, 0x0a00ae27u, 0x7d079eb1u,
    0xf00f9344u, 0x8708a3d2u, 0x1e01f268u, 0x6906c2feu, 0xf762575du, 0x806567cbu,
    0x196c3671u, 0x6e6b06e7u, 0xfed41b76u, 0x89d32be0u, 0x10da7a5au, 0x67dd4accu,
    0xf9b9df6fu, 0x8ebeeff9u, 0x17b7be43u, 0x60b08ed5u, 0xd6d6a3e8u, 0xa1d1937eu,
    0x38d8c2c4u, 0x4fdff252u, 0xd1bb67f1u, 0xa6bc5767u, 0x3fb506ddu, 0x48b2364bu,
    0xd80d2bdau, 0xaf0a1b4cu, 0x36034af6u, 0x41047a60u, 0xdf60efc3u, 0xa867df55u,
    0x316e8eefu, 0x4669be79u, 0xcb61b38cu, 0xbc66831au, 0x256fd2a0u, 0x5268e236u,
    0xcc0c7795u, 0xbb0b4703u, 0x220216b9u, 0x5505262fu, 0xc5ba3bbeu, 0xb2bd0b28u,
    0x2bb45a92u, 0x5cb36a04u, 0xc2d7ffa7u, 0xb5d0cf31u, 0x2cd99e8bu, 0x5bdeae1du,
    0x9b64c2b0u, 0xec63f226u, 0x756aa39cu, 0x026d930au, 0x9c0906a9u, 0xeb0e363fu,
    0x72076785u, 0x05005713u, 0x95bf4a82u, 0xe2b87a14u, 0x7bb12baeu, 0x0cb61b38u,
    0x92d28e9bu, 0xe5d5be0du, 0x7cdcefb7u, 0x0bdbdf21u, 0x86d3d2d4u, 0xf1d4e242u,
    0x68ddb3f8u, 0x1fda836eu, 0x81be16cdu, 0xf6b9265bu, 0x6fb077e1u, 0x18b74777u,
    0x88085ae6u, 0xff0f6a70u, 0x66063bcau, 0x11010b5cu, 0x8f659effu, 0xf862ae69u,
    0x616bffd3u, 0x166ccf45u, 0xa00ae278u, 0xd70dd2eeu, 0x4e048354u, 0x3903b3c2u,
    0xa7672661u, 0xd06016f7u, 0x4969474du, 0x3e6e77dbu, 0xaed16a4au, 0xd9d65adcu,
    0x40df0b66u, 0x37d83bf0u, 0xa9bcae53u, 0xdebb9ec5u, 0x47b2cf7fu, 0x30b5ffe9u,
    0xbdbdf21cu, 0xcabac28au, 0x53b39330u, 0x24b4a3a6u, 0xbad03605u, 0xcdd70693u,
    0x54de5729u, 0x23d967bfu, 0xb3667a2eu, 0xc4614ab8u, 0x5d681b02u, 0x2a6f2b94u,
    0xb40bbe37u, 0xc30c8ea1u, 0x5a05df1bu, 0x2d02ef8du,
};

uint32_t hilat_crc32_update(uint32_t crc, const uint8_t *data, size_t len)
{
    crc = ~crc;
    while (len--)
        crc = crc_table[(crc ^ *data++) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

uint32_t hilat_crc32(const uint8_t *data, size_t len)
{
    return hilat_crc32_update(0, data, len);
}

/* ---- COBS ---- */

/* A block of 254 data bytes (code 0xFF) implies no zero; the last block implies none either, so a
 * trailing full block is not followed by an empty 0x01 block (the common "canonical" form). */
size_t hilat_cobs_encode(const uint8_t *src, size_t len, uint8_t *dst, size_t cap)
{
    size_t out = 1, code_pos = 0, i;
    uint8_t code = 1;

    if (cap == 0)
        return 0;
    for (i = 0; i < len; i++) {
        uint8_t b = src[i];
        if (b != 0) {
            if (out >= cap)
                return 0;
            dst[out++] = b;
            code++;
        }
        if (b == 0 || code == 0xFFu) {
            dst[code_pos] = code;
            code = 1;
            code_pos = out;
            if (b == 0 || i + 1 < len) {
                if (out >= cap)
                    return 0;
                out++;
            }
        }
    }
    if (code_pos < out)
        dst[code_pos] = code;
    return out;
}

int hilat_cobs_decode(const uint8_t *src, size_t len, uint8_t *dst, size_t cap, size_t *out_len)
{
    size_t i = 0, o = 0;

    if (len == 0)
        return HILAT_ERR_COBS;
    while (i < len) {
        size_t code = src[i++], k;
        if (code == 0 || code - 1 > len - i)
            return HILAT_ERR_COBS;
        if (code - 1 > cap - o)
            return HILAT_ERR_TOO_LONG;
        /* Byte by byte, forwards: the output never overtakes the input (in place is safe). */
        for (k = 1; k < code; k++) {
            uint8_t b = src[i++];
            if (b == 0)
                return HILAT_ERR_COBS;
            dst[o++] = b;
        }
        if (code != 0xFFu && i < len) {
            if (o >= cap)
                return HILAT_ERR_TOO_LONG;
            dst[o++] = 0;
        }
    }
    *out_len = o;
    return HILAT_OK;
}

/* ---- frame builder ---- */

void hilat_frame_begin(hilat_frame_t *f, uint8_t type, uint16_t seq)
{
    f->buf[0] = (uint8_t)HILAT_PROTOCOL_VERSION;
    f->buf[1] = type;
    f->buf[2] = (uint8_t)seq;
    f->buf[3] = (uint8_t)(seq >> 8);
    f->len = HILAT_HEADER_SIZE;
    f->last = 0;
    f->records = 0;
    f->mask_bytes = 1;
}

size_t hilat_frame_remaining(const hilat_frame_t *f)
{
    return HILAT_MAX_PAYLOAD - f->len;
}

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

int hilat_frame_put_u8(hilat_frame_t *f, uint8_t v)
{
    if (f->len >= HILAT_MAX_PAYLOAD)
        return 0;
    f->buf[f->len++] = v;
    return 1;
}

int hilat_frame_put_u16(hilat_frame_t *f, uint16_t v)
{
    if (hilat_frame_remaining(f) < 2)
        return 0;
    f->buf[f->len] = (uint8_t)v;
    f->buf[f->len + 1] = (uint8_t)(v >> 8);
    f->len += 2;
    return 1;
}

int hilat_frame_put_u32(hilat_frame_t *f, uint32_t v)
{
    if (hilat_frame_remaining(f) < 4)
        return 0;
    put_le32(f->buf + f->len, v);
    f->len += 4;
    return 1;
}

int hilat_frame_put_u64(hilat_frame_t *f, uint64_t v)
{
    if (hilat_frame_remaining(f) < 8)
        return 0;
    put_le32(f->buf + f->len, (uint32_t)v);
    put_le32(f->buf + f->len + 4, (uint32_t)(v >> 32));
    f->len += 8;
    return 1;
}

size_t hilat_uleb128_size(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80u) {
        v >>= 7;
        n++;
    }
    return n;
}

static void put_uleb128(uint8_t *p, uint64_t v)
{
    while (v >= 0x80u) {
        *p++ = (uint8_t)(v | 0x80u);
        v >>= 7;
    }
    *p = (uint8_t)v;
}

int hilat_frame_put_uleb128(hilat_frame_t *f, uint64_t v)
{
    size_t n = hilat_uleb128_size(v);
    if (hilat_frame_remaining(f) < n)
        return 0;
    put_uleb128(f->buf + f->len, v);
    f->len += n;
    return 1;
}

int hilat_frame_put_bytes(hilat_frame_t *f, const uint8_t *data, size_t n)
{
    if (hilat_frame_remaining(f) < n)
        return 0;
    copy_bytes(f->buf + f->len, data, n);
    f->len += n;
    return 1;
}

int hilat_frame_put_strn(hilat_frame_t *f, const char *s, size_t n)
{
    if (n > 255u || hilat_frame_remaining(f) < n + 1)
        return 0;
    f->buf[f->len++] = (uint8_t)n;
    copy_bytes(f->buf + f->len, (const uint8_t *)s, n);
    f->len += n;
    return 1;
}

int hilat_frame_put_str(hilat_frame_t *f, const char *s)
{
    size_t n = 0;
    if (s)
        while (s[n])
            n++;
    return hilat_frame_put_strn(f, s, n);
}

size_t hilat_frame_finish(hilat_frame_t *f, uint8_t *out, size_t cap)
{
    size_t n;
    /* f->len <= HILAT_MAX_PAYLOAD, so the CRC always fits in buf. */
    put_le32(f->buf + f->len, hilat_crc32(f->buf, f->len));
    if (cap < 2)
        return 0;
    n = hilat_cobs_encode(f->buf, f->len + HILAT_CRC_SIZE, out, cap - 1);
    if (n == 0)
        return 0;
    out[n] = 0;
    return n + 1;
}

/* ---- rig -> host messages ---- */

/* Appends the channel table "name:role,name:role,..." as pairs of str; 0 if it does not have
 * `count` items or does not fit. */
static int put_channel_table(hilat_frame_t *f, const char *text, unsigned count)
{
    unsigned items = 0;
    const char *s = text ? text : "";
    while (*s) {
        const char *name = s, *role;
        size_t name_len = 0, role_len = 0;
        while (s[name_len] && s[name_len] != ':' && s[name_len] != ',')
            name_len++;
        if (s[name_len] != ':')
            return 0;
        role = s + name_len + 1;
        while (role[role_len] && role[role_len] != ',')
            role_len++;
        if (!hilat_frame_put_strn(f, name, name_len) || !hilat_frame_put_strn(f, role, role_len))
            return 0;
        items++;
        s = role + role_len;
        if (*s == ',')
            s++;
    }
    return items == count;
}

int hilat_msg_identify(hilat_frame_t *f, uint16_t seq, const hilat_identify_t *m)
{
    uint8_t *p;
    hilat_frame_begin(f, HILAT_MSG_IDENTIFY, seq);
    p = f->buf + f->len; /* 26 fixed bytes always fit in an empty frame */
    p[0] = m->version;
    put_le32(p + 1, m->ts_hz);
    put_le32(p + 5, m->sys_hz);
    p[9] = m->n_stimulus;
    p[10] = m->n_inputs;
    p[11] = (uint8_t)m->fifo_depth;
    p[12] = (uint8_t)(m->fifo_depth >> 8);
    p[13] = m->pin_to_stamp_delay;
    put_le32(p + 14, m->capabilities);
    p[18] = (uint8_t)m->min_interval;
    p[19] = (uint8_t)(m->min_interval >> 8);
    p[20] = m->glitch_max;
    put_le32(p + 21, m->start_margin);
    p[25] = m->samples_per_tick;
    f->len += 26;
    if (!(hilat_frame_put_str(f, m->firmware) && hilat_frame_put_str(f, m->gateware)
          && put_channel_table(f, m->channels, (unsigned)m->n_stimulus + m->n_inputs)
          && hilat_frame_put_u32(f, m->uart_baud) && hilat_frame_put_u8(f, m->ethernet ? 1u : 0u)))
        return 0;
    if (!m->ethernet)
        return hilat_frame_put_u8(f, m->tdc_inputs) && hilat_frame_put_u16(f, m->tdc_taps);
    return hilat_frame_put_u32(f, m->eth_ip) && hilat_frame_put_bytes(f, m->eth_mac, HILAT_MAC_BYTES)
           && hilat_frame_put_u16(f, m->eth_command_port) && hilat_frame_put_u16(f, m->eth_stream_port)
           && hilat_frame_put_u8(f, m->eth_record_words) && hilat_frame_put_u16(f, m->eth_max_records)
           && hilat_frame_put_u8(f, m->tdc_inputs) && hilat_frame_put_u16(f, m->tdc_taps);
}

int hilat_msg_overflow(hilat_frame_t *f, uint16_t seq, uint64_t timestamp, uint16_t channels)
{
    hilat_frame_begin(f, HILAT_MSG_OVERFLOW, seq);
    return hilat_frame_put_u64(f, timestamp) && hilat_frame_put_u16(f, channels);
}

int hilat_msg_status(hilat_frame_t *f, uint16_t seq, const hilat_status_t *m)
{
    unsigned i;
    int ok;
    if (m->n > HILAT_MAX_CHANNELS || m->stim_n > HILAT_MAX_STIMULUS || (m->fired_n != 0 && m->fired_n != m->stim_n))
        return 0;
    hilat_frame_begin(f, HILAT_MSG_STATUS, seq);
    /* At most 4 + 14 + 64 + 1 + 8 + 32 = 123 bytes: always fits. */
    hilat_frame_put_u32(f, m->records_sent);
    hilat_frame_put_u32(f, m->events_sent);
    hilat_frame_put_u32(f, m->frames_sent);
    hilat_frame_put_u8(f, m->overflow);
    hilat_frame_put_u8(f, m->n);
    for (i = 0; i < m->n; i++)
        hilat_frame_put_u32(f, m->dropped[i]);
    hilat_frame_put_u8(f, m->stim_n);
    ok = hilat_frame_put_bytes(f, m->stim_status, m->stim_n);
    for (i = 0; i < m->fired_n; i++)
        ok = ok && hilat_frame_put_u32(f, m->fired[i]);
    return ok;
}

int hilat_msg_ack(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint8_t code, const char *message)
{
    hilat_frame_begin(f, HILAT_MSG_ACK, seq);
    hilat_frame_put_u16(f, command_seq);
    hilat_frame_put_u8(f, code);
    return hilat_frame_put_str(f, message);
}

int hilat_msg_time(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, uint64_t now)
{
    hilat_frame_begin(f, HILAT_MSG_TIME, seq);
    hilat_frame_put_u16(f, command_seq);
    return hilat_frame_put_u64(f, now);
}

int hilat_msg_stream_status(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, const hilat_stream_status_t *m)
{
    hilat_frame_begin(f, HILAT_MSG_STREAM_STATUS, seq);
    /* 38 bytes: always fits. */
    hilat_frame_put_u16(f, command_seq);
    hilat_frame_put_u8(f, m->enabled);
    hilat_frame_put_u8(f, m->link);
    hilat_frame_put_u32(f, m->session);
    hilat_frame_put_u32(f, m->dst_ip);
    hilat_frame_put_u16(f, m->dst_port);
    hilat_frame_put_u16(f, m->flush_us);
    hilat_frame_put_u16(f, m->heartbeat_ms);
    hilat_frame_put_u32(f, m->datagrams);
    hilat_frame_put_u64(f, m->records);
    hilat_frame_put_u32(f, m->rx_frames);
    return hilat_frame_put_u32(f, m->command_dropped);
}

void hilat_events_begin(hilat_frame_t *f, uint16_t seq, uint64_t base, uint8_t mask_bytes, uint8_t fraction_bytes)
{
    hilat_frame_begin(f, HILAT_MSG_EVENTS, seq);
    hilat_frame_put_u64(f, base);
    hilat_frame_put_u8(f, HILAT_EVENTS_FORMAT(mask_bytes, fraction_bytes));
    f->last = base;
    f->mask_bytes = mask_bytes;
    f->fraction_bytes = fraction_bytes;
}

int hilat_events_add(hilat_frame_t *f, uint64_t timestamp, uint16_t channels, uint16_t levels, uint64_t fraction)
{
    uint64_t delta = timestamp - f->last; /* mod 2**64 */
    uint8_t *p = f->buf + f->len;
    size_t n, masks = 2u * f->mask_bytes + f->fraction_bytes; /* and the fraction after them */

    if (delta < 0x80u) { /* fast path: 1-byte delta */
        if (f->len + 1 + masks > HILAT_MAX_PAYLOAD)
            return 0;
        p[0] = (uint8_t)delta;
        n = 1;
    } else {
        n = hilat_uleb128_size(delta);
        if (f->len + n + masks > HILAT_MAX_PAYLOAD)
            return 0;
        put_uleb128(p, delta);
    }
    if (f->mask_bytes == 1) {
        p[n] = (uint8_t)channels;
        p[n + 1] = (uint8_t)levels;
    } else {
        p[n] = (uint8_t)channels;
        p[n + 1] = (uint8_t)(channels >> 8);
        p[n + 2] = (uint8_t)levels;
        p[n + 3] = (uint8_t)(levels >> 8);
    }
    for (size_t k = 0; k < f->fraction_bytes; k++) /* little-endian */
        p[n + 2u * f->mask_bytes + k] = (uint8_t)(fraction >> (8u * k));
    f->len += n + masks;
    f->last = timestamp;
    f->records++;
    return 1;
}

/* ---- rig -> host: the measurement engine ---- */

int hilat_msg_engine_stats(hilat_frame_t *f, uint16_t seq, uint16_t command_seq, const hilat_engine_stats_t *m)
{
    unsigned k, t;
    hilat_frame_begin(f, HILAT_MSG_ENGINE_STATS, seq);
    /* 28 + 3 * 72 = 244 bytes: always fits. */
    hilat_frame_put_u16(f, command_seq);
    hilat_frame_put_u8(f, m->state);
    hilat_frame_put_u64(f, m->samples);
    hilat_frame_put_u32(f, m->samples_lost);
    hilat_frame_put_u32(f, m->bins_lost);
    hilat_frame_put_u32(f, m->outliers_lost);
    hilat_frame_put_u8(f, m->trigger_delay);
    hilat_frame_put_u8(f, m->min_spacing);
    hilat_frame_put_u8(f, m->interval_shift_min);
    hilat_frame_put_u16(f, m->bins);
    for (k = 0; k < HILAT_ENGINE_KINDS; k++) {
        const hilat_engine_kind_stats_t *s = &m->kinds[k];
        hilat_frame_put_u64(f, s->misses);
        hilat_frame_put_u64(f, s->duplicates);
        hilat_frame_put_u64(f, s->below);
        for (t = 0; t < 2; t++) {
            hilat_frame_put_u64(f, s->tags[t].count);
            hilat_frame_put_u32(f, s->tags[t].min);
            hilat_frame_put_u32(f, s->tags[t].max);
            if (!hilat_frame_put_u64(f, s->tags[t].sum))
                return 0;
        }
    }
    return 1;
}

void hilat_engine_bins_begin(hilat_frame_t *f, uint16_t seq)
{
    hilat_frame_begin(f, HILAT_MSG_ENGINE_BINS, seq);
}

/* head:u8 then interval (and for a bin, bin and count) as uleb128. */
static int put_bins_entry(hilat_frame_t *f, uint8_t head, uint32_t interval, int is_bin, uint16_t bin,
                          uint64_t count)
{
    size_t n = 1 + hilat_uleb128_size(interval);
    uint8_t *p = f->buf + f->len;
    if (is_bin)
        n += hilat_uleb128_size(bin) + hilat_uleb128_size(count);
    if (hilat_frame_remaining(f) < n)
        return 0;
    *p++ = head;
    put_uleb128(p, interval);
    if (is_bin) {
        p += hilat_uleb128_size(interval);
        put_uleb128(p, bin);
        put_uleb128(p + hilat_uleb128_size(bin), count);
    }
    f->len += n;
    f->records++;
    return 1;
}

int hilat_engine_bins_add_bin(hilat_frame_t *f, uint8_t kind, uint8_t tag, uint32_t interval, uint16_t bin,
                              uint64_t count)
{
    if (kind >= HILAT_ENGINE_KINDS || tag > 1u || bin > HILAT_ENGINE_OVERFLOW_BIN)
        return HILAT_ERR_RANGE;
    return put_bins_entry(f, (uint8_t)(HILAT_ENGINE_ENTRY_BIN | kind << 2 | tag << 4), interval, 1, bin, count);
}

int hilat_engine_bins_add_close(hilat_frame_t *f, uint8_t kind, uint32_t interval)
{
    if (kind >= HILAT_ENGINE_KINDS)
        return HILAT_ERR_RANGE;
    return put_bins_entry(f, (uint8_t)(HILAT_ENGINE_ENTRY_CLOSE | kind << 2), interval, 0, 0, 0);
}

void hilat_engine_outliers_begin(hilat_frame_t *f, uint16_t seq)
{
    hilat_frame_begin(f, HILAT_MSG_ENGINE_OUTLIERS, seq);
}

int hilat_engine_outliers_add(hilat_frame_t *f, uint64_t start, uint8_t flags,
                              const uint32_t values[HILAT_ENGINE_KINDS])
{
    unsigned k;
    if (hilat_frame_remaining(f) < HILAT_ENGINE_OUTLIER_SIZE)
        return 0;
    hilat_frame_put_u64(f, start);
    hilat_frame_put_u8(f, flags);
    for (k = 0; k < HILAT_ENGINE_KINDS; k++)
        hilat_frame_put_u32(f, values[k]);
    f->records++;
    return 1;
}

/* ---- host -> rig commands ---- */

static uint16_t get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static uint64_t get_le64(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | ((uint64_t)get_le32(p + 4) << 32);
}

static int parse_body(const uint8_t *b, size_t n, hilat_command_t *cmd)
{
    unsigned i;
    switch (cmd->type) {
    case HILAT_MSG_HELLO:
        if (n != 1)
            return HILAT_ERR_BAD_LENGTH;
        cmd->u.hello.version = b[0];
        return HILAT_OK;
    case HILAT_MSG_STIM_CONFIG: {
        hilat_stim_config_t *s = &cmd->u.stim_config;
        if (n != 33)
            return HILAT_ERR_BAD_LENGTH;
        s->channel = b[0];
        s->mode = b[1];
        s->invert = b[2];
        s->width = get_le32(b + 3);
        s->period = get_le32(b + 7);
        s->jitter = get_le32(b + 11);
        s->probability = get_le32(b + 15);
        s->burst_count = get_le16(b + 19);
        s->burst_spacing = get_le32(b + 21);
        s->count = get_le32(b + 25);
        s->seed = get_le32(b + 29);
        return HILAT_OK;
    }
    case HILAT_MSG_CAPTURE_CONFIG: {
        hilat_capture_config_t *c = &cmd->u.capture_config;
        if (n < 1 || n != 1u + 2u * b[0])
            return HILAT_ERR_BAD_LENGTH;
        if (b[0] > HILAT_MAX_CHANNELS)
            return HILAT_ERR_RANGE;
        c->n = b[0];
        for (i = 0; i < c->n; i++) {
            c->flags[i] = b[1 + 2 * i];
            c->glitch[i] = b[2 + 2 * i];
        }
        return HILAT_OK;
    }
    case HILAT_MSG_START:
        if (n != 10)
            return HILAT_ERR_BAD_LENGTH;
        cmd->u.start.channels = b[0];
        cmd->u.start.at_time = b[1];
        cmd->u.start.start = get_le64(b + 2);
        return HILAT_OK;
    case HILAT_MSG_STOP:
        if (n != 1)
            return HILAT_ERR_BAD_LENGTH;
        cmd->u.stop.channels = b[0];
        return HILAT_OK;
    case HILAT_MSG_ENGINE_CONFIG: {
        hilat_engine_config_t *e = &cmd->u.engine_config;
        if (n != 35)
            return HILAT_ERR_BAD_LENGTH;
        e->flags = b[0];
        e->start_channel = b[1];
        e->start_level = b[2];
        e->isr_channel = b[3];
        e->isr_level = b[4];
        e->task_channel = b[5];
        e->task_level = b[6];
        e->tag_channel = b[7];
        e->tag_level = b[8];
        e->deadline = get_le32(b + 9);
        e->offset = get_le16(b + 13);
        e->interval_shift = b[15];
        for (i = 0; i < HILAT_ENGINE_KINDS; i++)
            e->threshold[i] = get_le32(b + 16 + 4 * i);
        e->trigger_response = b[28];
        e->trigger_threshold = get_le32(b + 29);
        e->trigger_width = get_le16(b + 33);
        return HILAT_OK;
    }
    case HILAT_MSG_STREAM_CONFIG: {
        hilat_stream_config_t *s = &cmd->u.stream_config;
        if (n != 15)
            return HILAT_ERR_BAD_LENGTH;
        s->enable = b[0];
        s->session = get_le32(b + 1);
        s->dst_ip = get_le32(b + 5);
        s->dst_port = get_le16(b + 9);
        s->flush_us = get_le16(b + 11);
        s->heartbeat_ms = get_le16(b + 13);
        return HILAT_OK;
    }
    case HILAT_MSG_NET_CONFIG:
        if (n != 4u + HILAT_MAC_BYTES)
            return HILAT_ERR_BAD_LENGTH;
        cmd->u.net_config.ip = get_le32(b);
        for (i = 0; i < HILAT_MAC_BYTES; i++)
            cmd->u.net_config.mac[i] = b[4 + i];
        return HILAT_OK;
    case HILAT_MSG_STATUS_REQ:
    case HILAT_MSG_TIME_REQ:
    case HILAT_MSG_ENGINE_STATS_REQ:
    case HILAT_MSG_ENGINE_FLUSH:
    case HILAT_MSG_STREAM_STATUS_REQ:
        return n == 0 ? HILAT_OK : HILAT_ERR_BAD_LENGTH;
    default:
        return HILAT_ERR_UNKNOWN_TYPE;
    }
}

int hilat_parse_command(const uint8_t *wire, size_t len, hilat_command_t *cmd)
{
    uint8_t dec[HILAT_MAX_DECODED];
    size_t n;
    int r;

    if (len > HILAT_MAX_ENCODED)
        return HILAT_ERR_TOO_LONG;
    r = hilat_cobs_decode(wire, len, dec, sizeof dec, &n);
    if (r != HILAT_OK)
        return r;
    if (n < HILAT_MIN_FRAME)
        return HILAT_ERR_SHORT;
    n -= HILAT_CRC_SIZE;
    if (hilat_crc32(dec, n) != get_le32(dec + n))
        return HILAT_ERR_CRC;
    cmd->version = dec[0];
    cmd->type = dec[1];
    cmd->seq = get_le16(dec + 2);
    cmd->crc = get_le32(dec + n);
    if (cmd->version != HILAT_PROTOCOL_VERSION)
        return HILAT_ERR_VERSION;
    return parse_body(dec + HILAT_HEADER_SIZE, n - HILAT_HEADER_SIZE, cmd);
}

/* ---- streaming receiver ---- */

void hilat_rx_init(hilat_rx_t *rx)
{
    rx->len = 0;
    rx->discarding = 0;
    rx->overlong = 0;
    rx->overlong_bytes = 0;
}

size_t hilat_rx_feed(hilat_rx_t *rx, uint8_t byte)
{
    if (byte == 0) {
        size_t n = rx->len;
        rx->len = 0;
        if (rx->discarding) {
            rx->discarding = 0;
            rx->overlong_bytes++;
            return 0;
        }
        return n;
    }
    if (rx->discarding) {
        rx->overlong_bytes++;
    } else if (rx->len < sizeof rx->buf) {
        rx->buf[rx->len++] = byte;
    } else {
        rx->discarding = 1;
        rx->overlong++;
        rx->overlong_bytes += (uint32_t)rx->len + 1u;
        rx->len = 0;
    }
    return 0;
}
