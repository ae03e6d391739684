"""Seed corpora of the firmware fuzzers, from the shared vectors.

    python fuzz_seeds.py DIR             fuzz_command_parser.c: every host->rig frame and every
                                         frame the rig must refuse, with and without its delimiter,
                                         and streams of several frames
    python fuzz_seeds.py --commands DIR  fuzz_firmware_commands.c: the same streams behind mode byte
                                         0 (UART) and 2 (UDP datagrams, on an Ethernet SoC), and
                                         sessions (HELLO, then commands) as length-prefixed payloads
                                         behind mode byte 1: on the UART, and on an Ethernet SoC
                                         over UDP too (bit 7 of a length byte)

One file per seed, named by its hash; prints how many files DIR holds."""

import hashlib
import json
import sys
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def _host_frames():
    frames = []
    for path in sorted(VECTORS.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("direction") == "host->rig" or path.name == "invalid_commands.json":
            frames += [bytes.fromhex(v["wire"]) for v in doc["vectors"]]
    return frames


def seeds():
    frames = _host_frames()
    out = []
    for wire in frames:
        out += [wire, wire.rstrip(b"\x00")]
    delimited = [w if w.endswith(b"\x00") else w + b"\x00" for w in frames]
    for k in range(0, len(delimited), 5):  # streams: frames back to back, garbage between some
        out.append(b"".join(delimited[k : k + 5]))
        out.append(b"\x00\x55\xaa" + b"\x00".join(delimited[k : k + 3]))
    return out


def command_seeds():
    from hilat.link import protocol as p

    sessions = []
    for n_channels in (6, 12):  # the simulated rig's 2 + 4 channels, a board's 2 + 10
        flags = p.CAPTURE_ENABLE | p.CAPTURE_RISE | p.CAPTURE_FALL
        sessions.append([
            p.Hello(), p.StimConfig(channel=0, mode=p.MODE_DITHER, width=10, period=5000, jitter=1000, count=100),
            p.StimConfig(channel=1, mode=p.MODE_BURST, width=2, period=9000, burst_count=3, burst_spacing=100),
            p.CaptureConfig([(flags, 3)] * n_channels), p.Start(channels=3, at_time=1, start=1 << 30),
            p.TimeReq(), p.StatusReq(), p.Stop(channels=3), p.Start(channels=4),
            # The engine on the simulated rig's roles: stim0, isr, task and tag (in3) rising.
            p.EngineConfig(p.ENGINE_ENABLE | p.ENGINE_RAW, 0, 1, 2, 1, 3, 1, 5, 1, deadline=50_000, offset=20,
                           interval_shift=20, thresholds=[10_000, 20_000, p.ENGINE_NEVER],
                           trigger_response=p.ENGINE_TRIGGER_ISR, trigger_threshold=5000, trigger_width=10),
            p.EngineStatsReq(), p.EngineFlush(), p.EngineStatsReq(),
            # The Ethernet link (refused on a rig without it).
            p.StreamConfig(1, 0x5EC0_1D01, 0xC0A80164, 5900, 100, 100), p.StreamStatusReq(),
            p.Start(channels=0), p.StreamConfig(0, 7, 0, 0, 0, 0), p.NetConfig(0xC0A80133, 0x10E2D5000051),
            p.StreamStatusReq(),
        ])
    out = [b"\x00" + s for s in seeds()] + [b"\x02" + s for s in seeds()]
    for session in sessions:
        payloads = []
        for seq, msg in enumerate(session):
            wire = msg.encode(seq)[:-1]
            payloads.append(p.cobs_decode(wire)[:-4])  # header + body, without the CRC
        # A command whose reply was lost comes again (same seq and bytes): answered, not re-executed.
        repeated = payloads[:6] + [payloads[5]] + payloads[6:8] + [payloads[7], payloads[7]] + payloads[8:]
        for frames in (payloads, repeated):
            out.append(b"\x01" + b"".join(bytes([len(raw)]) + raw for raw in frames))
            # On an Ethernet SoC: every command over UDP; and all but the STREAM_CONFIGs (whose
            # destination 0 the UART refuses) every other one.
            out.append(b"\x01" + b"".join(bytes([0x80 | len(raw)]) + raw for raw in frames))
            out.append(b"\x01" + b"".join(bytes([(0x80 if k % 2 or raw[1] == p.MSG_STREAM_CONFIG else 0) | len(raw)])
                                          + raw for k, raw in enumerate(frames)))
    return out


def main(directory, commands=False):
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for data in command_seeds() if commands else seeds():
        (target / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(list(target.iterdir()))


if __name__ == "__main__":
    commands = sys.argv[1] == "--commands"
    print(main(sys.argv[-1], commands))
