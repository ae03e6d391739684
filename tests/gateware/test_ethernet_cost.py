"""The Ethernet cores' cost as docs/ethernet.md states it: a synthesis of each part alone."""

from gateware.ethcmd import RX_FIFO_BYTES, TX_FIFO_BYTES
from gateware.ethernet import ethernet_cost
from gateware.ethstream import PAYLOAD_FIFO_WORDS
from gateware.standalone import LUT4_PER_CELL


def test_stream_and_command_bridge_cost_from_their_own_synthesis(tmp_path):
    """yosys synth_ecp5 of EthStream and EthCommandBridge, each with its CSRs: the block RAMs are
    the payload FIFO's one (512 x 36) and the two byte FIFOs' one each (2048 x 9); the LUT4
    equivalents add up from the cell counts. (The LiteEth stack's synthesis, part ``ethnet``, takes
    tens of minutes: its figures in docs/ethernet.md come from ``ethernet_cost`` run by hand.)"""
    cost = ethernet_cost(tmp_path, parts=("ethstream", "ethcmd"))
    stream, command = cost["parts"]["ethstream"], cost["parts"]["ethcmd"]
    assert PAYLOAD_FIFO_WORDS == 512 and RX_FIFO_BYTES == TX_FIFO_BYTES == 2048
    assert stream["block_rams"] == stream["cells"]["DP16KD"] == 1
    assert command["block_rams"] == command["cells"]["DP16KD"] == 2
    for part in (stream, command):
        assert part["lut4_equivalent"] == sum(part["cells"].get(c, 0) * k for c, k in LUT4_PER_CELL.items())
        assert 300 < part["lut4_equivalent"] < 4000 and 200 < part["flip_flops"] < 2000
    assert cost["block_rams"] == 3 and cost["lut4_equivalent"] == stream["lut4_equivalent"] + command["lut4_equivalent"]
