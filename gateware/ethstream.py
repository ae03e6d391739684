"""EthStream: the capture's records as UDP datagrams, built in gateware (docs/ethernet.md).

The record stream (the ``sys`` side of the capture FIFO, ``gateware.capture.record_layout``) is cut
into datagrams of fixed-width little-endian records behind a 36-byte header, sent from the rig's
stream port (5801) onto a LiteEth UDP user port with the 32-bit datapath.

Structure (docs/ethernet.md, "The stream datagram"; docs/timing-cores.md, "EthStream"):

- ``_Packer``: takes one record at a time into a register and writes its ``record_words`` words into
  the payload FIFO (one word a cycle); decides where a datagram closes (full, flush time, an offset
  that does not fit 32 bits, disable / restart) and then queues the datagram's description (base,
  count, flags) in the header queue; queues a restart marker and, on a quiet stream, heartbeats.
- ``_HeartbeatBound``: T, the tick below which every record has left the capture FIFO, from a
  snapshot of the timebase crossed into ``sys`` and a quiet window (the bound is derived in
  docs/timing-cores.md).
- ``_Sender``: for each queued description, the 9 header words, then the payload words, as one
  UDP datagram (the UDP header's length is known before its payload: a datagram is only started once
  it is complete in the payload FIFO). It owns ``seq`` and ``first_index`` (the ``datagrams`` and
  ``records`` counters).

Block RAM: the payload FIFO, 512 words of 32 bits (one ECP5 DP16KD, 512x36): a whole datagram (at
most 367 words with its header's worth: 179 records of 2 words, 89 of 4, 59 of 6) plus the start of
the next, which fills while the first is sent. The header queue (4 entries) is in registers / LUT RAM.
"""

import math

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.fifo import SyncFIFOBuffered

from gateware.cdc import Snapshot

MAGIC        = 0x54414C48   # the bytes 48 4C 41 54, "HLAT"
VERSION      = 1
HEADER_WORDS = 9            # 36 bytes
FLAG_HEARTBEAT = 1
MAX_PAYLOAD_BYTES = 1472    # UDP payload in one 1500-byte IP packet (no fragmentation)
STREAM_PORT  = 5801
PAYLOAD_FIFO_WORDS = 512    # one DP16KD (512 x 36)


def record_words(layout):
    """32-bit words a record of ``layout`` takes in a datagram: the 32-bit offset, then channels,
    levels, kind and fraction (docs/ethernet.md, "Record"), rounded up to an even count (the host
    reads records as 64-bit halves): 2, or 4 with a TDC's 32- or 64-bit fraction."""
    widths = dict((name, width) for name, width in layout)
    bits = 32 + 2 * widths["channels"] + 1 + widths["fraction"]
    return 2 * ((bits + 63) // 64)


def max_records(words):
    return (MAX_PAYLOAD_BYTES - 4 * HEADER_WORDS) // (4 * words)


def _header_layout(count_bits):
    return [
        ("base",      64),           # tick of the first record; T in a heartbeat
        ("count",     count_bits),   # records in the datagram
        ("heartbeat", 1),
        ("restart",   1),            # not a datagram: seq, first_index to 0, `session` latched
        ("session",   32),
    ]


def heartbeat_depth(capture):
    """Ticks from a record's tick to its write into ``capture``'s FIFO, plus one of margin: the
    record register holds a record of tick t in tick t + ``RECORD_DELAY``, and the FIFO's write
    pointer has moved past it from the next tick on (docs/timing-cores.md, "Heartbeat bound")."""
    return capture.RECORD_DELAY + 1 + 1


def route_records(source, to_stream, to_csr, enable):
    """The capture FIFO's ``source`` to ``to_stream`` while ``enable``, else to ``to_csr`` (the CPU's
    CSR reader): one FIFO, two readers, never both (docs/ethernet.md, "Routing")."""
    return If(enable, source.connect(to_stream)).Else(source.connect(to_csr))


class _HeartbeatBound(LiteXModule):
    """T for a heartbeat, in ``sys``: pulse ``start``; ``done`` rises with ``tick`` = T once the
    record stream (``quiet`` = nothing held, nothing offered) has stayed quiet ``quiet_cycles`` after
    the timebase was read; any record in that window cancels (``done`` never rises; start again).

    Why T is a bound (docs/timing-cores.md, "Heartbeat bound"): the snapshot names a tick S at or
    before the cycle ``sys`` sees it. A record of tick t < S - ``depth`` was written into the
    capture FIFO before tick S (``depth`` covers pin to FIFO write), so within a few ``sys`` cycles
    the FIFO's read side shows it; an overflow marker is written at most a few ``ts`` cycles after
    the FIFO's read side last freed room. ``quiet_cycles`` covers both, so a window without any
    record proves each such record left before it, in a datagram queued before the heartbeat.
    """
    def __init__(self, timebase_ts, depth, quiet_cycles, ts_domain):
        self.start = Signal()
        self.quiet = Signal()
        self.done  = Signal()
        self.tick  = Signal(64)   # T, valid with `done`

        # # #

        self.snapshot = Snapshot([timebase_ts], ts_domain)
        waited = Signal(max=quiet_cycles + 1)
        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            If(self.start,
                self.snapshot.request.eq(1),
                NextState("READ"),
            )
        )
        fsm.act("READ",
            If(self.snapshot.valid,
                NextValue(self.tick, self.snapshot.outputs[0] - depth),
                NextValue(waited, 0),
                NextState("QUIET"),
            )
        )
        fsm.act("QUIET",
            If(~self.quiet,
                NextState("IDLE"),
            ).Elif(waited == quiet_cycles,
                self.done.eq(1),
                NextState("IDLE"),
            ).Else(
                NextValue(waited, waited + 1),
            )
        )


class _Packer(LiteXModule):
    """Records -> payload words and datagram descriptions (see the module's docstring)."""
    def __init__(self, sink, payload, header, words, limit, heartbeat_bound):
        self.enable           = Signal()
        self.restart          = Signal()   # pulse
        self.session          = Signal(32)
        self.flush_cycles     = Signal(32)
        self.heartbeat_cycles = Signal(32)

        # # #

        held       = Record(sink.description.payload_layout)   # the record being written
        held_valid = Signal()
        word       = Signal(max=max(words, 2))           # its word being written
        is_open    = Signal()                            # a datagram has records
        count      = Signal(max=limit + 1)
        base       = Signal(64)
        flush_wait = Signal(32)                          # cycles the open datagram's first record waited
        quiet_time = Signal(32)                          # cycles since the last datagram was queued
        restart_pending = Signal()
        session_next    = Signal(32)

        offset = Signal(64)
        fits   = Signal()
        drain  = Signal()   # finish the records taken, send what is open
        idle   = Signal()
        close_request = Signal()
        close  = Signal()
        write  = Signal()
        write_last = Signal()
        mark_restart = Signal()
        heartbeat    = Signal()

        bits = Cat(Mux(is_open, offset[:32], 0), held.channels, held.levels, held.kind, held.fraction)
        padded = Signal(32 * words)
        self.comb += [
            padded.eq(bits),
            offset.eq(held.timestamp - base),
            fits.eq(offset[32:] == 0),
            drain.eq(~self.enable | restart_pending),
            # Draining, what is open goes once nothing is held and, unless restarting, nothing is
            # offered (the skid register's record left the FIFO before `enable` fell).
            idle.eq(~held_valid & (restart_pending | ~sink.valid)),
            close_request.eq(is_open & (word == 0) & (
                (count == limit) | (flush_wait >= self.flush_cycles) |
                (held_valid & ~fits) | (drain & idle))),
            close.eq(close_request & header.sink.ready),
            write.eq(held_valid & ~close_request & payload.writable),
            write_last.eq(write & (word == words - 1)),
            payload.we.eq(write),
            payload.din.eq(Array(padded[32*k:32*(k + 1)] for k in range(words))[word]),
            sink.ready.eq((~held_valid | write_last) & ~restart_pending),
            mark_restart.eq(restart_pending & ~is_open & ~held_valid),
            heartbeat_bound.quiet.eq(~is_open & ~held_valid & ~sink.valid & ~drain),
            heartbeat.eq(heartbeat_bound.done & ~mark_restart),
            heartbeat_bound.start.eq((self.heartbeat_cycles != 0) & (quiet_time >= self.heartbeat_cycles) &
                                     heartbeat_bound.quiet),
            # The header queue: a datagram closed, else the restart marker, else a heartbeat.
            header.sink.valid.eq(close_request | mark_restart | heartbeat),
            header.sink.base.eq(Mux(close_request, base, heartbeat_bound.tick)),
            header.sink.count.eq(Mux(close_request, count, 0)),
            header.sink.heartbeat.eq(~close_request & ~mark_restart),
            header.sink.restart.eq(~close_request & mark_restart),
            header.sink.session.eq(session_next),
        ]
        self.sync += [
            If(sink.valid & sink.ready,
                held.eq(sink.payload),
                held_valid.eq(1),
            ).Elif(write_last,
                held_valid.eq(0),
            ),
            If(write,
                If(word == 0,
                    If(~is_open,
                        is_open.eq(1),
                        base.eq(held.timestamp),
                        flush_wait.eq(0),
                    ),
                ),
                If(word == words - 1,
                    word.eq(0),
                    count.eq(count + 1),
                ).Else(
                    word.eq(word + 1),
                ),
            ),
            If(is_open & (flush_wait != 2**32 - 1), flush_wait.eq(flush_wait + 1)),
            If(close,
                is_open.eq(0),
                count.eq(0),
            ),
            If(header.sink.valid & header.sink.ready,
                quiet_time.eq(0),
            ).Elif(quiet_time != 2**32 - 1,
                quiet_time.eq(quiet_time + 1),
            ),
            If(self.restart,
                restart_pending.eq(1),
                session_next.eq(self.session),
            ).Elif(mark_restart & header.sink.ready & ~close_request,
                restart_pending.eq(0),
            ),
        ]
        # `write` at word 0 of a fresh datagram takes the record's tick as base in the same cycle
        # the word (offset 0) is written: `bits` uses 0 then, not the stale base.


class _Sender(LiteXModule):
    """Header queue + payload FIFO -> UDP datagrams (see the module's docstring)."""
    def __init__(self, header, payload, udp, words):
        self.dst_ip     = Signal(32)
        self.dst_port   = Signal(16)
        self.seq        = Signal(32)   # datagrams sent since restart (heartbeats included)
        self.sent       = Signal(64)   # records sent since restart: the next first_index

        # # #

        session = Signal(32)
        entry   = header.source
        index   = Signal(max=HEADER_WORDS)
        remaining = Signal(16)   # payload words still to send
        flags_word = Cat(C(VERSION, 8), entry.heartbeat, C(0, 7), C(words, 8), C(HEADER_WORDS, 8))
        header_words = Array([
            C(MAGIC, 32), flags_word, session, self.seq,
            self.sent[:32], self.sent[32:], entry.base[:32], entry.base[32:],
            Cat(entry.count, C(0, 32 - len(entry.count))),
        ])
        payload_words = Signal(16)
        self.comb += [
            payload_words.eq(entry.count * words),
            udp.src_port.eq(STREAM_PORT),
            udp.dst_port.eq(self.dst_port),
            udp.ip_address.eq(self.dst_ip),
            udp.length.eq(4 * HEADER_WORDS + 4 * payload_words),
            udp.last_be.eq(Mux(udp.last, 0b1000, 0)),
        ]
        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            If(entry.valid,
                If(entry.restart,
                    entry.ready.eq(1),
                    NextValue(self.seq, 0),
                    NextValue(self.sent, 0),
                    NextValue(session, entry.session),
                ).Else(
                    NextValue(index, 0),
                    NextState("HEADER"),
                )
            )
        )
        fsm.act("HEADER",
            udp.valid.eq(1),
            udp.data.eq(header_words[index]),
            udp.last.eq((index == HEADER_WORDS - 1) & (entry.count == 0)),
            If(udp.ready,
                NextValue(index, index + 1),
                NextValue(remaining, payload_words),
                If(index == HEADER_WORDS - 1,
                    If(entry.count == 0,
                        entry.ready.eq(1),
                        NextValue(self.seq, self.seq + 1),
                        NextState("IDLE"),
                    ).Else(
                        NextState("PAYLOAD"),
                    )
                )
            )
        )
        fsm.act("PAYLOAD",
            udp.valid.eq(payload.readable),
            udp.data.eq(payload.dout),
            udp.last.eq(remaining == 1),
            payload.re.eq(udp.ready),
            If(udp.valid & udp.ready,
                NextValue(remaining, remaining - 1),
                If(remaining == 1,
                    entry.ready.eq(1),
                    NextValue(self.seq, self.seq + 1),
                    NextValue(self.sent, self.sent + entry.count),
                    NextState("IDLE"),
                )
            )
        )


class EthStream(LiteXModule):
    """Records -> UDP datagrams (docs/ethernet.md), in ``sys``.

    ``record_layout``  the capture's record layout (``gateware.capture.record_layout``).
    ``udp``            a LiteEth UDP user port's ``sink`` (32-bit data), or None: ``self.udp`` is
                       then this core's own endpoint (tests drive its ready).
    ``timebase_ts``    the timebase's tick, in ``ts_domain``; ``depth``: ticks from a record's tick to
                       its write into the capture FIFO (``EdgeCapture.FIFO_WRITE_DELAY``).
    ``quiet_cycles``   ``sys`` cycles the record stream must stay quiet after the timebase is read
                       before a heartbeat goes (see ``_HeartbeatBound``, ``quiet_cycles_for``).
    ``sys_clk_freq``   sets the flush time's reset value to 100 us.
    ``sink``           the record stream, in ``sys``.
    """
    def __init__(self, record_layout, timebase_ts, depth, udp=None, ts_domain="ts", quiet_cycles=64,
                 sys_clk_freq=None, with_csr=True):
        self.words = words = record_words(record_layout)
        self.max_records = limit = max_records(words)
        # The datagram being filled always fits beside nothing else: no deadlock with the sender.
        assert limit * words <= PAYLOAD_FIFO_WORDS
        self.sink = stream.Endpoint(record_layout)
        self.udp  = udp if udp is not None else stream.Endpoint(udp_user_layout())
        self.depth = depth
        # Reset of the flush time: docs/ethernet.md's default, 100 us (without a clock: one datagram a
        # record until the firmware sets it).
        self.flush_cycles_reset = int(100e-6 * sys_clk_freq) if sys_clk_freq else 0

        # # #

        self.payload = payload = SyncFIFOBuffered(32, PAYLOAD_FIFO_WORDS)
        self.header  = header  = stream.SyncFIFO(_header_layout(bits_for(limit)), 4)
        self.heartbeat_bound = _HeartbeatBound(timebase_ts, depth, quiet_cycles, ts_domain)
        # The capture FIFO's read side sees a registered ready (its `re` drives the read pointer's
        # Gray counter): the packer's ready, behind the 64-bit offset compare, is cut off here.
        self.skid = stream.PipeReady(record_layout)
        self.comb += self.sink.connect(self.skid.sink)
        self.packer = _Packer(self.skid.source, payload, header, words, limit, self.heartbeat_bound)
        self.sender = _Sender(header, payload, self.udp, words)
        self.enable = self.packer.enable

        if with_csr:
            self.add_csr()

    @staticmethod
    def quiet_cycles_for(sys_clk_freq, ts_clk_freq):
        """The quiet window of ``_HeartbeatBound``, in ``sys`` cycles: a record written into the
        capture FIFO shows on its read side within 3 ``sys`` cycles (the write pointer's two
        synchronizer stages, the output register); an overflow marker is written within 7 ``ts``
        cycles of the read side freeing room (pointer synchronizer 2, Gray to binary 2, half-free 1,
        the write decision 1, the write 1). Both doubled, rounded up."""
        return 2 * 3 + math.ceil(2 * 7 * sys_clk_freq / ts_clk_freq)

    def add_csr(self):
        self._control = CSRStorage(fields=[
            CSRField("enable", size=1, description=
                "``1``: the capture's records go to the stream (not to the ``capture_ev_*`` reader). "
                "Clearing it sends what the datagram being filled holds."),
            CSRField("restart", size=1, pulse=True, description=
                "Write ``1`` to restart the stream: the datagram being filled is sent first, then "
                "``seq`` and ``first_index`` start again from 0 and ``session`` is latched."),
        ], description="Stream control.")
        self._session = CSRStorage(32, description="Session id for the next restart (the header's ``session``).")
        self._dst_ip = CSRStorage(32, description=
            "Destination IPv4 address, numeric (192.168.1.100 = 0xC0A80164).")
        self._dst_port = CSRStorage(16, description="Destination UDP port.")
        self._flush_cycles = CSRStorage(32, reset=self.flush_cycles_reset, description=
            "``sys`` cycles a datagram's first record may wait (from its arrival here) before the "
            "datagram is sent.")
        self._heartbeat_cycles = CSRStorage(32, description=
            "``sys`` cycles between heartbeats on a quiet stream (0: no heartbeats).")
        self._datagrams = CSRStatus(32, description="Datagrams sent since the restart, heartbeats included.")
        self._records = CSRStatus(64, description="Records sent since the restart.")
        packer, sender = self.packer, self.sender
        self.comb += [
            packer.enable.eq(self._control.fields.enable),
            packer.restart.eq(self._control.fields.restart),
            packer.session.eq(self._session.storage),
            packer.flush_cycles.eq(self._flush_cycles.storage),
            packer.heartbeat_cycles.eq(self._heartbeat_cycles.storage),
            sender.dst_ip.eq(self._dst_ip.storage),
            sender.dst_port.eq(self._dst_port.storage),
            self._datagrams.status.eq(sender.seq),
            self._records.status.eq(sender.sent),
        ]


def udp_user_layout():
    """A LiteEth UDP user port's layout at 32 bits (params: ports, address, length; data, last_be)."""
    from liteeth.common import eth_udp_user_description
    return eth_udp_user_description(32)
