"""The Ethernet link on the host (docs/ethernet.md): the datagram decoder's exact counts and gaps
for drops, duplicates, reordering, stale and malformed datagrams, overflow markers and heartbeats;
the receiver's stream.bin; commands resent when their reply is lost; captures against the fake UDP
rig (tests/host/udp_rig.py) giving the serial fake's records, and replaying from stream.bin."""

import json
import socket
import subprocess
import time

import numpy as np
import pytest
from hilat import analysis
from hilat.link import udp
from hilat.link.batch import holes, segments
from hilat.link.rig import RigSilent
from hilat.link.session import Session
from hilat.link.transport import Transport, TransportError, parse_udp_url
from hilat.link.udp_receiver import Receiver
from hilat.rundir.reader import load_run
from hilat.rundir.replay import read_raw, stream_of
from stream_rig import StreamRig, capture_command, records_for
from udp_rig import UdpRig, UdpRigProcess

LAYOUT = udp.Layout(6, 0)
FULL = udp.max_records()       # 179
SESSION = 0x1234ABCD


def records(n, seed=1):
    rng = np.random.default_rng(seed)
    ticks = (1000 + np.cumsum(rng.integers(1, 50, n))).astype(np.uint64)
    return ticks, rng.integers(1, 64, n), rng.integers(0, 64, n)


def gaps_of(batches):
    """(records in order, closed gaps) as the capture's GapTracker makes them from the batches."""
    tracker = analysis.GapTracker()
    closed, parts = [], []
    for batch in batches:
        for lo, hi, what in segments(len(batch.ticks), holes(batch.marks)):
            if what is None:
                closed += tracker.records(batch.ticks[lo:hi])
                parts.append(batch.ticks[lo:hi])
            elif isinstance(what, int):
                tracker.frames_lost()
            else:
                tracker.overflow(what.msg.timestamp, what.msg.channels)
    closed += tracker.close()
    return np.concatenate(parts) if parts else np.zeros(0, np.uint64), [(a, b, c) for a, b, c, _ in closed]


def decode(datagrams, chunks=1, recv_step_ns=0, **kw):
    """Decode datagrams fed in ``chunks`` pieces (receive times ``recv_step_ns`` apart a piece)."""
    decoder = udp.StreamDecoder(LAYOUT, session=SESSION, **kw)
    bounds = np.linspace(0, len(datagrams), chunks + 1).astype(int)
    batches = [decoder.feed(udp.slots_of(datagrams[a:b], recv_ns=i * recv_step_ns))
               for i, (a, b) in enumerate(zip(bounds[:-1], bounds[1:]))]
    batches.append(decoder.flush())
    return decoder, batches


def test_in_order_stream_decodes_to_its_records_in_any_chunks():
    ticks, ch, lv = records(5000)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    assert len(datagrams) == -(-5000 // FULL) and len(datagrams[0]) == udp.MAX_PAYLOAD - 4   # 36 + 179 * 8
    for chunks in (1, 7, len(datagrams)):
        decoder, batches = decode(datagrams, chunks)
        out = np.concatenate([b.ticks for b in batches])
        np.testing.assert_array_equal(out, ticks)
        np.testing.assert_array_equal(np.concatenate([b.channels for b in batches]), ch)
        np.testing.assert_array_equal(np.concatenate([b.levels for b in batches]), lv)
        assert all(not b.marks for b in batches)
        c = decoder.counters()
        assert (c["datagrams"], c["records"], c["datagrams_lost"], c["records_lost"]) == (len(datagrams), 5000, 0, 0)


def test_a_dropped_datagram_is_a_gap_from_the_record_before_to_the_record_after():
    ticks, ch, lv = records(1000)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    sent = datagrams[:2] + datagrams[3:]
    decoder, batches = decode(sent, chunks=3)
    out, gaps = gaps_of(batches)
    lost = slice(2 * FULL, 3 * FULL)
    np.testing.assert_array_equal(out, np.delete(ticks, np.arange(2 * FULL, 3 * FULL)))
    assert gaps == [(int(ticks[lost.start - 1]) + 1, int(ticks[lost.stop]), analysis.ALL_CHANNELS)]
    c = decoder.counters()
    assert (c["datagrams_lost"], c["records_lost"], c["reordered"], c["duplicated"]) == (1, FULL, 0, 0)


def test_duplicates_are_dropped_and_reordered_datagrams_put_back_in_order():
    ticks, ch, lv = records(2000)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    order = [0, 1, 3, 2, 2, 4, 5, 1, 7, 6, 8, 9, 10, 11, 9]   # 3 reordered (2, 6 ... ), 3 copies
    decoder, batches = decode([datagrams[i] for i in order], chunks=4)
    out, gaps = gaps_of(batches)
    np.testing.assert_array_equal(out, ticks[:12 * FULL])
    assert gaps == []
    c = decoder.counters()
    assert (c["reordered"], c["duplicated"], c["datagrams_lost"], c["late"]) == (2, 3, 0, 0)


def test_a_hole_is_waited_for_within_the_window_then_given_up_and_a_late_one_dropped():
    ticks, ch, lv = records(30 * FULL)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    decoder = udp.StreamDecoder(LAYOUT, session=SESSION, reorder_window=8, reorder_wait_ns=10**12)
    first = decoder.feed(udp.slots_of(datagrams[:5] + datagrams[6:12]))   # 6 past the hole at 5: waited for
    assert len(first.ticks) == 5 * FULL and decoder.counters()["held"] == 6
    second = decoder.feed(udp.slots_of(datagrams[12:15]))                 # 9 past it: given up
    assert decoder.counters()["held"] == 0 and second.marks == [(0, FULL)]
    late = decoder.feed(udp.slots_of([datagrams[5]]))
    assert len(late.ticks) == 0 and decoder.counters()["late"] == 1 and decoder.counters()["datagrams_lost"] == 1
    # The same by the receive times: 20 ms of arrivals after the first one past the hole.
    decoder = udp.StreamDecoder(LAYOUT, session=SESSION)
    decoder.feed(udp.slots_of(datagrams[:5] + datagrams[6:8], recv_ns=0))
    assert decoder.counters()["held"] == 2
    after = decoder.feed(udp.slots_of(datagrams[8:9], recv_ns=udp.REORDER_WAIT_NS))
    assert decoder.counters()["held"] == 0 and after.marks == [(0, FULL)] and len(after.ticks) == 3 * FULL


def test_stale_and_malformed_datagrams_are_counted_and_dropped():
    ticks, ch, lv = records(3 * FULL)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    stale = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION + 1)[0]
    bad_magic = b"XXXX" + datagrams[1][4:]
    short = datagrams[1][:-8]                         # its length does not match its count
    wrong_words = bytearray(udp.encode_datagram(SESSION, 1, 0, 0, np.zeros(3, np.uint64), record_words=3))
    wrong_words[32:34] = (2).to_bytes(2, "little")    # two 3-word records: well formed, not this layout
    decoder, batches = decode([stale, datagrams[0], bad_magic, datagrams[1], short, bytes(wrong_words), b"HLAT",
                               datagrams[2]])
    out, gaps = gaps_of(batches)
    np.testing.assert_array_equal(out, ticks)
    c = decoder.counters()
    assert (c["stale"], c["malformed"], c["datagrams_lost"]) == (1, 4, 0)
    assert decoder.wrong_layout == (3, udp.HEADER_WORDS)


def test_records_of_8_tdc_inputs_take_4_words_laid_out_by_hand():
    # docs/ethernet.md, "Record": from bit 0 of the first little-endian 32-bit word, the offset (32
    # bits), channels (n), levels (n), kind (1), fraction; rounded up to an even count of words.
    # 2 stimulus outputs + 8 TDC inputs: 33 + 20 + 64 = 117 bits, 4 words.
    from hilat.link import protocol as p

    ident = p.Identify(5, 10**8, 5 * 10**7, 2, 8, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw",
                       [(f"c{k}", "") for k in range(10)], 0, tdc_inputs=8, tdc_taps=256)
    layout = udp.Layout.of(ident)
    assert layout == udp.Layout(10, 64, 4) and udp.Layout.of(ident, 4) == layout
    records = [(0, 0b00_0000_0100, 0b00_0000_0100, 0x0000_0000_0000_0001),
               (3, 0b11_1111_1100, 0b10_1010_1000, 0xFF01_8040_2010_0807),
               (0xFFFF_FFFF, 0b10_0000_0000, 0, 0xFF00_0000_0000_0000)]
    payload = b"".join((off | ch << 32 | lv << 42 | fr << 53).to_bytes(16, "little") for off, ch, lv, fr in records)
    offsets, ch, lv, fr = (np.array(x, np.uint64) for x in zip(*records))
    assert udp.pack_records(layout, offsets, ch, lv, fractions=fr).tobytes() == payload
    base = 1 << 40
    datagram = udp.encode_datagram(SESSION, 0, 0, base, np.frombuffer(payload, "<u8").reshape(-1, 2), record_words=4)
    assert len(datagram) == udp.HEADER_BYTES + len(payload) and datagram[udp.HEADER_BYTES:] == payload
    # A later version's longer header (header_words 10): a reader skips to 4 * header_words.
    longer = bytearray(datagram[:udp.HEADER_BYTES] + bytes(4) + payload)
    longer[7] = udp.HEADER_WORDS + 1
    for compiled, data in ((True, datagram), (False, datagram), (True, bytes(longer))):
        decoder = udp.StreamDecoder(layout, session=SESSION)
        if not compiled:
            decoder._fast_records = lambda *args: None
        batch = decoder.feed(udp.slots_of([data]))
        assert decoder.counters()["malformed"] == 0
        assert batch.ticks.tolist() == [base + off for off, *_ in records]
        assert batch.channels.tolist() == [r[1] for r in records] and batch.levels.tolist() == [r[2] for r in records]
        assert batch.fractions.dtype == np.uint64 and batch.fractions.tolist() == [r[3] for r in records]
    # The 2-word layout cannot hold them; an odd count of words is not a layout.
    for words in (2, 3):
        with pytest.raises(ValueError, match="10 channels and 64 fraction bits"):
            udp.Layout(10, 64, words).check()
    assert [udp.record_words_for(n, f) for n, f in ((6, 0), (6, 4), (6, 32), (10, 16), (10, 64), (16, 64))] == \
        [2, 2, 4, 4, 4, 6]


def test_a_tdc_runs_stream_bin_is_replayed_with_its_layout():
    # meta.json's rig is the IDENTIFY as a dict: a TDC rig's (protocol 5) has tdc_inputs, a run from
    # before has none (no TDC), and its records' words are its Ethernet tail's.
    import dataclasses

    from hilat.link import protocol as p

    ident = p.Identify(5, 10**8, 5 * 10**7, 2, 8, 512, 17, 0x3F, 4, 15, 1000, 1, "fw", "gw",
                       [(f"c{k}", "") for k in range(10)], 0, p.EthernetInfo(1, 2, 5800, 5801, 4, 89), 8, 256)
    meta = {"rig": dataclasses.asdict(ident), "counters": {"stream": {"session": 7}}}
    assert stream_of(meta) == {"layout": udp.Layout(10, 64, 4), "session": 7}
    old = {**meta["rig"], "ethernet": [1, 2, 5800, 5801, 2, 179]}
    del old["tdc_inputs"], old["tdc_taps"]
    assert stream_of({**meta, "rig": old})["layout"] == udp.Layout(10, 0, 2)


def test_overflow_markers_become_gaps_on_their_channels():
    ticks, ch, lv = records(400)
    kinds = np.zeros(400, np.int64)
    kinds[[50, 250]] = 1            # the gateware's overflow markers: channels that dropped, from their tick
    ch[[50, 250]] = [0b100, 0b1000]
    decoder, batches = decode(udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION, kinds=kinds))
    out, gaps = gaps_of(batches)
    np.testing.assert_array_equal(out, np.delete(ticks, [50, 250]))
    assert gaps == [(int(ticks[50]), int(ticks[51]), 0b100), (int(ticks[250]), int(ticks[251]), 0b1000)]
    assert decoder.counters()["overflow_markers"] == 2 and decoder.counters()["records"] == 398


def test_heartbeats_say_complete_up_to_and_a_lost_one_loses_no_records():
    ticks, ch, lv = records(FULL)
    data = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    beats = [udp.encode_datagram(SESSION, 1 + i, FULL, int(ticks[-1]) + 1000 * (i + 1), heartbeat=True)
             for i in range(3)]
    decoder, batches = decode(data + [beats[0], beats[2]])    # beat 1 lost
    assert decoder.complete_before == int(ticks[-1]) + 3000
    out, gaps = gaps_of(batches)
    assert gaps == [] and len(out) == FULL
    c = decoder.counters()
    assert (c["heartbeats"], c["datagrams_lost"], c["records_lost"]) == (2, 1, 0)


def test_receiver_writes_every_datagram_to_stream_bin(tmp_path):
    ticks, ch, lv = records(20_000)
    datagrams = udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION)
    receiver = Receiver(tmp_path / "stream.bin", bind=("127.0.0.1", 0)).start()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in datagrams:
            s.sendto(d, ("127.0.0.1", receiver.port))
    deadline = time.monotonic() + 5
    while receiver.slots < len(datagrams) and time.monotonic() < deadline:
        time.sleep(0.01)
    receiver.stop()
    assert receiver.slots == len(datagrams) and receiver.error is None
    decoder = udp.StreamDecoder(LAYOUT, session=SESSION)
    out = np.concatenate([b.ticks for b in udp.decode_stream_file(tmp_path / "stream.bin", decoder, chunk_slots=17)])
    np.testing.assert_array_equal(out, ticks)
    with pytest.raises(udp.StreamFileError, match="not a hilat datagram stream"):
        list(udp.iter_stream_file(tmp_path / "nothing.bin")) if (tmp_path / "nothing.bin").write_bytes(b"x" * 40) \
            else None


def test_udp_url():
    assert parse_udp_url("udp://192.168.1.50") == ("192.168.1.50", 5800)
    assert parse_udp_url("udp://rig.local:6000") == ("rig.local", 6000)
    for bad in ("udp://", "udp://host:0", "udp://host:x"):
        with pytest.raises(ValueError, match="udp://HOST"):
            parse_udp_url(bad)
    with pytest.raises(TransportError, match="cannot open udp://no.such.host.invalid"):
        Transport("udp://no.such.host.invalid")


def test_a_command_whose_reply_is_lost_is_sent_again_and_executed_once():
    with UdpRig(drop_replies={"TIME_REQ": 1, "STOP": 2}) as rig, Session(rig.url) as session:
        assert session.now() > 0
        session.stop(1)
        assert session.rig.resends == 3
        assert rig.executed["TIME_REQ"] == 1 and rig.executed["STOP"] == 1 and rig.received == 1 + 2 + 3
        assert session.decoder_counters["duplicate"] == 0   # each reply came once
    with UdpRig(drop_replies={"TIME_REQ": 100}) as rig, Session(rig.url, command_timeout=0.6) as session:
        with pytest.raises(RigSilent, match=r"no reply to TIME_REQ .* within 0.6 s \(sent 3 times, every 0.25 s\)"):
            session.now()
        assert rig.executed["TIME_REQ"] == 1


def _edges(run_dir):
    run = load_run(run_dir)
    return run, run.ticks - run.ticks[0], run.chans, run.levels


def test_capture_over_udp_gives_the_serial_fakes_records(tmp_path):
    stimuli = 3000
    with UdpRigProcess(stimuli=stimuli, rate=20_000) as rig:
        result = subprocess.run(capture_command(rig.url, stimuli, tmp_path / "udp"), capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with StreamRig(stimuli=stimuli) as rig:
        result = subprocess.run(capture_command(rig.url, stimuli, tmp_path / "serial"), capture_output=True,
                                text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    (udp_dir,), (serial_dir,) = (tmp_path / "udp").iterdir(), (tmp_path / "serial").iterdir()
    run, *edges = _edges(udp_dir)
    _, *serial_edges = _edges(serial_dir)
    for a, b in zip(edges, serial_edges):
        np.testing.assert_array_equal(a, b)
    assert run.meta["records"] == records_for(stimuli)
    stream = run.meta["counters"]["stream"]
    assert stream["records"] == stream["rig_records_sent"] == records_for(stimuli)
    assert stream["datagrams_received"] == stream["rig_datagrams_sent"] and stream["records_lost"] == 0
    assert run.losses == {} and run.problems == [] and run.meta["results"]["raw"] == "complete"
    summary = json.loads((udp_dir / "summary.json").read_text())
    serial = json.loads((serial_dir / "summary.json").read_text())
    assert summary["runs"][0]["kinds"] == serial["runs"][0]["kinds"]


def drop_every_tenth(datagrams):
    return [d for i, d in enumerate(datagrams) if i % 10 != 9]


def test_lossy_udp_capture_states_its_losses_and_replays_from_stream_bin(tmp_path):
    from hilat.acquisition.capture import Capture
    from hilat.acquisition.settings import CaptureSettings, StimulusSettings

    stimuli = 1500
    settings = CaptureSettings(count=stimuli, out_dir=tmp_path, progress=False, deadline_ticks=100,
                               stimulus=StimulusSettings(mode="periodic", period=100, jitter=0))
    with UdpRig(stimuli=stimuli, faults=drop_every_tenth) as rig:
        capture = Capture(rig.url, settings).run()
    assert capture.error is None
    run = load_run(capture.run_dir)
    stream = run.meta["counters"]["stream"]
    n_datagrams = -(-records_for(stimuli) // FULL)
    lost = [i for i in range(n_datagrams) if i % 10 == 9]
    lost_records = sum(min(FULL, records_for(stimuli) - i * FULL) for i in lost)
    assert (stream["datagrams_lost"], stream["records_lost"]) == (len(lost), lost_records)
    assert stream["records"] == records_for(stimuli) - lost_records == run.meta["records"]
    assert run.losses["records lost on the Ethernet link"] == lost_records
    assert run.meta["results"]["raw"] == "partial" and len(run.gaps) == len(lost)
    # The raw files alone give the same edges and gaps.
    ticks, chans, levels, counters, gaps = read_raw(capture.run_dir / "raw.bin", with_gaps=True,
                                                    stream=stream_of(run.meta))
    np.testing.assert_array_equal(ticks, run.ticks)
    np.testing.assert_array_equal(chans, run.chans)
    np.testing.assert_array_equal(gaps.start, run.gaps.start)
    np.testing.assert_array_equal(gaps.end, run.gaps.end)
    assert counters["stream"]["records_lost"] == lost_records
    # A run cut short (no final meta.json) is decoded from raw.bin and stream.bin.
    meta = {**run.meta, "interim": True}
    (capture.run_dir / "meta.json").write_text(json.dumps(meta))
    cut = load_run(capture.run_dir)
    assert cut.edges_source == "raw.bin" and cut.meta["counters"]["stream"]["records_lost"] == lost_records
    np.testing.assert_array_equal(cut.ticks, run.ticks)


def test_labgrid_network_service_is_an_ethernet_rig():
    """HilatDriver bound to a NetworkService reaches the rig at udp://ADDRESS:5800 (labgrid runs
    in .venv-labgrid: tests/host/test_labgrid.py says why)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    python = root / ".venv-labgrid" / "bin" / "python"
    if not python.exists():
        pytest.fail(".venv-labgrid is missing: run scripts/setup-labgrid.sh (make setup runs it)")
    code = ("import hilat.labgrid as L; from labgrid import Target; from labgrid.resource import NetworkService; "
            "print(L.rig_url(NetworkService(Target('t'), 'rig', address='192.168.1.50', username='lab')))")
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": str(root / "host"), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "('udp://192.168.1.50:5800', None)"


def test_a_run_without_stimulus_restarts_the_stream_with_a_start_of_mask_0(tmp_path):
    class Consumer:
        records = 0

        def __call__(self, ticks, *_):
            self.records += len(ticks)

    consumer = Consumer()
    with UdpRig() as rig, Session(rig.url) as session:
        session.open_stream(tmp_path / "stream.bin")
        at = session.start(0)
        assert rig.executed["START"] == 1
        deadline = time.monotonic() + 5
        while session.complete_before is None and time.monotonic() < deadline:
            session.poll(consumer)
        link = session.close_stream(consumer)
    assert session.complete_before is not None and session.complete_before >= at
    c = link.counters()
    assert c["heartbeats"] >= 1 and c["datagrams_lost"] == 0 and c["records"] == consumer.records == 0
    assert c["heartbeats"] - c["rig_datagrams_sent"] in (0, 1)   # one may leave between STREAM_STATUS and the disable


def test_a_receiver_that_ends_on_its_own_is_a_clear_error_after_what_it_wrote(tmp_path):
    from hilat.link.udp_receiver import StreamLink

    ticks, ch, lv = records(2 * FULL)
    link = StreamLink(tmp_path / "stream.bin", LAYOUT, SESSION, bind_ip="127.0.0.1")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for d in udp.encode_stream(LAYOUT, ticks, ch, lv, SESSION):
            s.sendto(d, ("127.0.0.1", link.port))
    deadline = time.monotonic() + 5
    while link.receiver.slots < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    link.receiver.proc.kill()
    link.receiver.proc.wait()
    # The decode thread hands on everything the receiver wrote before it died, in one batch or more
    # (a cold process may decode the first datagram alone).
    got, deadline = [], time.monotonic() + 5
    while sum(map(len, got)) < len(ticks) and time.monotonic() < deadline:
        batch = link.poll()
        if batch is not None:
            got.append(batch.ticks)
    np.testing.assert_array_equal(np.concatenate(got), ticks)
    with pytest.raises(TransportError, match=r"receiver exited with code -9: what it wrote to .*stream.bin is kept"):
        link.poll()
    link.stop()
