"""Seed corpus of the firmware fuzzer (tests/firmware/fuzz_command_parser.c), from the shared vectors:
every host->rig frame and every frame the rig must refuse, with and without its delimiter, and a few
streams of several frames. Usage: python fuzz_seeds.py DIR (writes one file per seed, named by hash)."""

import hashlib
import json
import sys
from pathlib import Path

VECTORS = Path(__file__).resolve().parents[1] / "vectors"


def seeds():
    frames = []
    for path in sorted(VECTORS.glob("*.json")):
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("direction") == "host->rig" or path.name == "invalid_commands.json":
            frames += [bytes.fromhex(v["wire"]) for v in doc["vectors"]]
    out = []
    for wire in frames:
        out += [wire, wire.rstrip(b"\x00")]
    delimited = [w if w.endswith(b"\x00") else w + b"\x00" for w in frames]
    for k in range(0, len(delimited), 5):  # streams: frames back to back, garbage between some
        out.append(b"".join(delimited[k : k + 5]))
        out.append(b"\x00\x55\xaa" + b"\x00".join(delimited[k : k + 3]))
    return out


def main(directory):
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    for data in seeds():
        (target / hashlib.sha1(data).hexdigest()).write_bytes(data)
    return len(list(target.iterdir()))


if __name__ == "__main__":
    print(main(sys.argv[1]))
