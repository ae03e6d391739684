"""EthCommandBridge (gateware/ethcmd.py) on Verilator: command datagrams in, their bytes out through
the CSRs (as the firmware reads them) with each datagram's source address and port; a reply appended
byte by byte leaves as one datagram (length, ports, the last word's byte enable); a datagram that
finds the buffer full is dropped whole and counted, never half of it in the buffer. The bridge is
all in ``sys``: one clock ratio of tb.CLOCKS is enough (ts only runs the unused capture).
"""

import random

import cocotb
from cocotb.triggers import ClockCycles, FallingEdge, ReadOnly
from eth_tb import EthTB, receive_all, run_ethernet_cocotb
from tb import CLOCKS


async def send(tb, payload, ip, port, junk_words=0, rng=None):
    """``payload`` as one datagram into the command port, as LiteEth's UDP receiver gives it: 32-bit
    words, byte 0 in bits 0..7, ``length`` the payload's bytes, ``last_be`` one-hot on the last
    valid byte; ``junk_words`` more words after it (frame padding) that must not be taken. Random
    gaps between words (``rng``)."""
    dut = tb.dut
    padded = payload + bytes(rng.getrandbits(8) if rng else 0xA5 for _ in range(-len(payload) % 4 + 4 * junk_words))
    words = [int.from_bytes(padded[i:i + 4], "little") for i in range(0, len(padded), 4)]
    for k, word in enumerate(words):
        while True:
            await FallingEdge(dut.sys_clk)
            valid = int(rng is None or rng.random() < 0.7)
            dut.cmd_in_valid.value = valid
            dut.cmd_in_data.value = word
            dut.cmd_in_last.value = int(k == len(words) - 1)
            dut.cmd_in_last_be.value = (1 << ((len(payload) - 1) % 4)) if 4 * k + 4 >= len(payload) > 4 * k else 0
            dut.cmd_in_length.value = len(payload)
            dut.cmd_in_ip_address.value = ip
            dut.cmd_in_src_port.value = port
            dut.cmd_in_dst_port.value = 5800
            await ReadOnly()
            if valid and dut.cmd_in_ready.value:
                break
    await FallingEdge(dut.sys_clk)
    dut.cmd_in_valid.value = 0


@cocotb.test()
async def datagrams_in_bytes_out(dut):
    """Datagrams of 1 to 300 bytes (with frame padding after some) arrive with gaps: each one's
    bytes, exactly, its last byte flagged, its source address and port beside it."""
    tb = EthTB(dut, CLOCKS[0])
    await tb.start()
    rng = random.Random(3)
    sent = []
    for k, size in enumerate([1, 2, 3, 4, 5, 8, 13, 300, 7]):
        payload = bytes(rng.getrandbits(8) for _ in range(size))
        ip, port = 0xC0A80100 + k, 40000 + k
        await send(tb, payload, ip, port, junk_words=k % 3, rng=rng)
        sent.append((payload, ip, port))
    assert await receive_all(tb) == sent
    assert await tb.read("ethcmd_rx_dropped") == 0


@cocotb.test()
async def reply_leaves_as_one_datagram(dut):
    """Bytes appended through ``tx_data`` leave on ``tx_send`` as one datagram from port 5800 to
    ``tx_dst_ip:tx_dst_port``: its length, its bytes in order, the last word's byte enable; while
    it has not left, ``tx_status.ready`` is 0 and bytes written are ignored."""
    tb = EthTB(dut, CLOCKS[0])
    await tb.start()
    await tb.write("ethcmd_tx_dst_ip", 0xC0A80164)
    await tb.write("ethcmd_tx_dst_port", 50123)
    rng = random.Random(4)
    replies = []
    for size in (1, 2, 3, 4, 5, 9, 257):
        payload = bytes(rng.getrandbits(8) for _ in range(size))
        assert (await tb.read_fields("ethcmd_tx_status"))["ready"]
        for b in payload:
            await tb.write("ethcmd_tx_data", b)
        tb.cmd_ready = 0.0 if size == 257 else 0.6
        await tb.write_fields("ethcmd_tx_send", send=1)
        if size == 257:   # held off by the port: not ready, and a byte written now is not taken
            await ClockCycles(dut.sys_clk, 20)
            assert not (await tb.read_fields("ethcmd_tx_status"))["ready"]
            await tb.write("ethcmd_tx_data", 0x77)
            tb.cmd_ready = 0.6
        await ClockCycles(dut.sys_clk, 2 * size + 40)
        replies.append(payload)
    await tb.write_fields("ethcmd_tx_send", send=1)   # nothing appended: nothing sent
    await ClockCycles(dut.sys_clk, 40)
    assert [d.payload for d in tb.replies] == replies
    for d, payload in zip(tb.replies, replies):
        assert d.params == dict(length=len(payload), ip_address=0xC0A80164, src_port=5800, dst_port=50123)
        assert len(d.words) == (len(payload) + 3) // 4
        assert d.last_be == 1 << ((len(payload) - 1) % 4)


@cocotb.test()
async def full_buffer_drops_whole_datagrams(dut):
    """Datagrams arriving while the buffer has no room for all of one are dropped whole and
    counted; those that fit are taken whole, also after a drop; once read, the room is back."""
    tb = EthTB(dut, CLOCKS[0])
    await tb.start()
    rng = random.Random(5)

    def payload(size):
        return bytes(rng.getrandbits(8) for _ in range(size))

    big = [payload(900), payload(900), payload(300), payload(200)]
    for k, p in enumerate(big):
        await send(tb, p, 0x0A000001, 1000 + k)
    # 900 + 900 taken; 300 does not fit the 249 bytes left (the FIFO's 2048 and its output register); 200 does.
    assert await tb.read("ethcmd_rx_dropped") == 1
    got = await receive_all(tb)
    assert got == [(big[0], 0x0A000001, 1000), (big[1], 0x0A000001, 1001), (big[3], 0x0A000001, 1003)]
    # The room is back: the largest datagram is taken.
    whole = payload(1472)
    await send(tb, whole, 0x0A000002, 2000)
    assert await receive_all(tb) == [(whole, 0x0A000002, 2000)]
    # More datagrams than the source queue holds: those beyond it are dropped whole, counted.
    for k in range(20):
        await send(tb, payload(3), 0x0A000003, 3000 + k)
    got = await receive_all(tb)
    assert [port for _, _, port in got] == list(range(3000, 3016))
    assert await tb.read("ethcmd_rx_dropped") == 1 + 4


def test_ethcmd():
    run_ethernet_cocotb(__file__)
