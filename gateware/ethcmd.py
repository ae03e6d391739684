"""EthCommandBridge: the command port's UDP datagrams as bytes for the firmware, and back
(docs/ethernet.md, "CSRs", ``ethcmd``).

Receive: each datagram on the command port (5800) goes byte by byte into a byte FIFO (each byte with
a "last of its datagram" flag), and its source address and port into a small queue beside it; the
firmware reads the head byte and its datagram's source through CSRs. A datagram is taken only if
the byte FIFO has room for all of it when it arrives (its UDP length is known with its first word):
otherwise it is dropped whole and counted, so the FIFO never holds part of a datagram.

Send: the firmware appends bytes (``tx_data``) and pulses ``tx_send``; the bytes go as one datagram
from port 5800 to ``tx_dst_ip:tx_dst_port``. ``tx_status.ready`` is low from the send until the
datagram has left; bytes written meanwhile are ignored.

Block RAM: the receive FIFO, 2048 x 9 (one ECP5 DP16KD); the send FIFO, 2048 x 8 (one DP16KD). A
datagram's UDP payload is at most 1,472 bytes, so the largest fits an empty buffer.
"""

from litex.gen import LiteXModule
from litex.soc.interconnect import stream
from litex.soc.interconnect.csr import CSRField, CSRStatus, CSRStorage
from migen import *
from migen.genlib.fifo import SyncFIFOBuffered

COMMAND_PORT   = 5800
RX_FIFO_BYTES  = 2048
TX_FIFO_BYTES  = 2048
SOURCES_DEPTH  = 16   # datagrams waiting at once (their source address and port)


def _udp_user_layout():
    from liteeth.common import eth_udp_user_description
    return eth_udp_user_description(32)


class _Receiver(LiteXModule):
    """UDP user port ``source`` -> byte FIFO + sources queue; whole datagrams or none."""
    def __init__(self, udp, byte_fifo, sources):
        self.dropped = Signal(32)

        # # #

        word   = Signal(32)
        length = Signal(16)       # bytes of the datagram being taken
        taken  = Signal(16)       # its bytes written so far
        lane   = Signal(2)        # byte of `word` being written
        ended  = Signal()         # `word` is its datagram's last word
        free   = Signal(max=RX_FIFO_BYTES + 2)
        self.comb += free.eq(RX_FIFO_BYTES + 1 - byte_fifo.level)   # SyncFIFOBuffered holds depth + 1

        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            If(udp.valid,
                If((udp.length != 0) & (udp.length <= free) & sources.sink.ready,
                    # Room for all of it: its source goes in the queue now, its bytes follow.
                    sources.sink.valid.eq(1),
                    udp.ready.eq(1),
                    NextValue(word, udp.data),
                    NextValue(ended, udp.last),
                    NextValue(length, udp.length),
                    NextValue(taken, 0),
                    NextValue(lane, 0),
                    NextState("BYTES"),
                ).Else(
                    If(udp.length != 0, NextValue(self.dropped, self.dropped + 1)),
                    NextState("DROP"),
                )
            )
        )
        fsm.act("DROP",
            udp.ready.eq(1),
            If(udp.valid & udp.last, NextState("IDLE")),
        )
        last_byte = Signal()
        self.comb += [
            sources.sink.ip_address.eq(udp.ip_address),
            sources.sink.src_port.eq(udp.src_port),
            last_byte.eq((taken == length - 1) | ((lane == 3) & ended)),
            byte_fifo.din.eq(Cat(Array(word[8*k:8*(k + 1)] for k in range(4))[lane], last_byte)),
        ]
        fsm.act("BYTES",
            byte_fifo.we.eq(1),   # room was checked for the whole datagram
            NextValue(taken, taken + 1),
            NextValue(lane, lane + 1),
            If(last_byte,
                If(ended, NextState("IDLE")).Else(NextState("DROP")),   # the rest: padding
            ).Elif(lane == 3,
                NextState("NEXT"),
            )
        )
        fsm.act("NEXT",
            udp.ready.eq(1),
            If(udp.valid,
                NextValue(word, udp.data),
                NextValue(ended, udp.last),
                NextState("BYTES"),
            )
        )


class _Transmitter(LiteXModule):
    """Byte FIFO -> one UDP datagram on ``send``."""
    def __init__(self, udp, byte_fifo, byte_count):
        self.send     = Signal()
        self.ready    = Signal()
        self.dst_ip   = Signal(32)
        self.dst_port = Signal(16)

        # # #

        length = Signal(16)
        left   = Signal(16)      # bytes still to read from the FIFO
        word   = Signal(32)
        lane   = Signal(2)
        self.comb += [
            udp.src_port.eq(COMMAND_PORT),
            udp.dst_port.eq(self.dst_port),
            udp.ip_address.eq(self.dst_ip),
            udp.length.eq(length),
        ]
        self.fsm = fsm = FSM(reset_state="IDLE")
        fsm.act("IDLE",
            self.ready.eq(1),
            If(self.send & (byte_count != 0),
                NextValue(length, byte_count),
                NextValue(left, byte_count),
                NextValue(lane, 0),
                NextValue(word, 0),
                NextState("GATHER"),
            )
        )
        fsm.act("GATHER",
            byte_fifo.re.eq(1),
            If(byte_fifo.readable,
                Case(lane, {k: NextValue(word[8*k:8*(k + 1)], byte_fifo.dout) for k in range(4)}),
                NextValue(lane, lane + 1),
                NextValue(left, left - 1),
                If((lane == 3) | (left == 1), NextState("SEND")),
            )
        )
        lanes = Signal(3)   # valid bytes in the word: 1..4
        self.comb += lanes.eq(Mux(lane == 0, 4, lane))
        fsm.act("SEND",
            udp.valid.eq(1),
            udp.data.eq(word),
            udp.last.eq(left == 0),
            udp.last_be.eq(Mux(left == 0, Array(C(1 << k, 4) for k in range(4))[lanes - 1], 0)),
            If(udp.ready,
                NextValue(word, 0),
                If(left == 0, NextState("IDLE")).Else(NextState("GATHER")),
            )
        )


class EthCommandBridge(LiteXModule):
    """The command port <-> the firmware, in ``sys``. ``udp``: a LiteEth UDP user port (32-bit), or
    None (``self.udp`` is then this core's own: ``sink`` the datagrams in, ``source`` out)."""
    def __init__(self, udp=None, with_csr=True):
        if udp is None:
            udp = type("Port", (), {})()
            udp.source = stream.Endpoint(_udp_user_layout())   # datagrams arriving (we read it)
            udp.sink   = stream.Endpoint(_udp_user_layout())   # datagrams leaving (we drive it)
        self.udp = udp

        # # #

        self.rx_fifo = SyncFIFOBuffered(9, RX_FIFO_BYTES)   # byte, last of its datagram
        self.sources = stream.SyncFIFO([("ip_address", 32), ("src_port", 16)], SOURCES_DEPTH)
        self.receiver = _Receiver(udp.source, self.rx_fifo, self.sources)
        self.tx_fifo = SyncFIFOBuffered(8, TX_FIFO_BYTES)
        self.tx_count = Signal(16)   # bytes appended to the datagram being written
        self.transmitter = _Transmitter(udp.sink, self.tx_fifo, self.tx_count)
        self.tx_append = Signal()    # pulse: append `tx_byte`
        self.tx_byte   = Signal(8)
        self.comb += [
            self.tx_fifo.din.eq(self.tx_byte),
            self.tx_fifo.we.eq(self.tx_append & self.transmitter.ready & (self.tx_count < TX_FIFO_BYTES)),
        ]
        self.sync += [
            If(self.transmitter.send & self.transmitter.ready,
                self.tx_count.eq(0),
            ).Elif(self.tx_fifo.we,
                self.tx_count.eq(self.tx_count + 1),
            )
        ]

        if with_csr:
            self.add_csr()

    def add_csr(self):
        self._rx_status = CSRStatus(fields=[
            CSRField("pending", size=1, description="``1``: a byte waits in ``rx_data``."),
            CSRField("last", size=1, description="``1``: it is the last byte of its datagram."),
        ], description="Command receive status (flags).")
        self._rx_data = CSRStatus(8, description="The byte at the head of the receive buffer.")
        self._rx_pop = CSRStorage(fields=[
            CSRField("pop", size=1, pulse=True, description="Write ``1`` to drop the head byte."),
        ], description="Receive buffer read strobe (write-1).")
        self._rx_src_ip = CSRStatus(32, description=
            "Source IPv4 address (numeric) of the datagram the head byte belongs to.")
        self._rx_src_port = CSRStatus(16, description="Source UDP port of the datagram the head byte belongs to.")
        self._tx_data = CSRStorage(8, description=
            "Writing it appends the byte to the outgoing datagram (ignored while ``tx_status.ready`` "
            f"is 0, or beyond {TX_FIFO_BYTES} bytes).")
        self._tx_send = CSRStorage(fields=[
            CSRField("send", size=1, pulse=True, description=
                "Write ``1`` to send the bytes appended as one datagram to ``tx_dst_ip:tx_dst_port`` "
                "(nothing is sent without bytes)."),
        ], description="Send strobe (write-1).")
        self._tx_dst_ip = CSRStorage(32, description="Destination IPv4 address (numeric) of replies.")
        self._tx_dst_port = CSRStorage(16, description="Destination UDP port of replies.")
        self._tx_status = CSRStatus(fields=[
            CSRField("ready", size=1, description=
                "``1``: the previous datagram has left; bytes may be appended."),
        ], description="Command send status (flag).")
        self._rx_dropped = CSRStatus(32, description=
            "Command datagrams dropped whole because the receive buffer had no room for them (count).")
        rx, sources = self.rx_fifo, self.sources.source
        pop = self._rx_pop.fields.pop & rx.readable
        self.comb += [
            self._rx_status.fields.pending.eq(rx.readable),
            self._rx_status.fields.last.eq(rx.dout[8]),
            self._rx_data.status.eq(rx.dout[:8]),
            rx.re.eq(pop),
            sources.ready.eq(pop & rx.dout[8]),
            self._rx_src_ip.status.eq(sources.ip_address),
            self._rx_src_port.status.eq(sources.src_port),
            self.tx_append.eq(self._tx_data.re),
            self.tx_byte.eq(self._tx_data.storage),
            self.transmitter.send.eq(self._tx_send.fields.send),
            self.transmitter.dst_ip.eq(self._tx_dst_ip.storage),
            self.transmitter.dst_port.eq(self._tx_dst_port.storage),
            self._tx_status.fields.ready.eq(self.transmitter.ready),
            self._rx_dropped.status.eq(self.receiver.dropped),
        ]
