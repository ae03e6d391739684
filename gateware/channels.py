"""The rig's channels: the one table the SoC, the board targets, the simulator's DUT ports,
``docs/wiring.md`` and (through IDENTIFY) the host derive from.

Channel numbers are capture-stream positions: first the stimulus outputs (their own edges are
captured too), then the DUT inputs. A channel has a fixed *name* (what its header pin is labelled)
and a *default role* (what the host pairs it as unless told otherwise at capture time):

==========  =========  ===========================================================================
role        direction  meaning
==========  =========  ===========================================================================
stimulus    out        a stimulus output, to a DUT interrupt input
isr         in         DUT pin raised on ISR entry, dropped on exit
task        in         DUT pin raised when the woken task runs, dropped when it blocks
spare       in         calibration: the loopback jumper from ``stim0``, or a GPS 1PPS
tag         in         DUT pin high while a condition holds (Faller's "DMA active")
(none)      in         a further input, for measurements defined at capture time
==========  =========  ===========================================================================
"""

from dataclasses import dataclass

ROLE_STIMULUS = "stimulus"
# Roles of in0, in1, ... by default (today's wiring); further inputs have none.
DEFAULT_INPUT_ROLES = ("isr", "task", "spare", "tag")
ROLE_DESCRIPTIONS = {
    "stimulus": "stimulus output -> a DUT interrupt input",
    "isr":      "DUT pin raised on ISR entry, dropped on exit",
    "task":     "DUT pin raised when the woken task runs",
    "spare":    "calibration: loopback jumper from stim0, or a GPS 1PPS",
    "tag":      "DUT pin high while a condition holds (e.g. DMA active)",
    "":         "free input (no default role; for measurements named at capture time)",
}
# IDENTIFY carries every name and role as a short string (docs/protocol.md).
MAX_NAME = 12


@dataclass(frozen=True)
class Channel:
    number: int     # position in the capture stream (bit of the channel masks)
    name: str       # pin label: stim0, stim1, in0, in1, ...
    direction: str  # "out" (stimulus) or "in" (DUT input)
    role: str       # default role ("" for none)

    @property
    def description(self):
        return ROLE_DESCRIPTIONS[self.role]


def channel_table(n_stimulus=2, n_inputs=4):
    """Every channel of a rig with ``n_stimulus`` outputs and ``n_inputs`` DUT inputs, in order."""
    assert 1 <= n_stimulus <= 8 and 0 <= n_inputs
    table = [Channel(i, f"stim{i}", "out", ROLE_STIMULUS) for i in range(n_stimulus)]
    for k in range(n_inputs):
        role = DEFAULT_INPUT_ROLES[k] if k < len(DEFAULT_INPUT_ROLES) else ""
        table.append(Channel(n_stimulus + k, f"in{k}", "in", role))
    return table


def outputs(table):
    return [c for c in table if c.direction == "out"]


def inputs(table):
    return [c for c in table if c.direction == "in"]


def identify_text(table):
    """The channel table as the firmware sends it in IDENTIFY: ``name:role`` per channel, comma
    separated, in channel order (a soc.h string constant; the firmware splits it)."""
    for c in table:
        assert len(c.name) <= MAX_NAME and len(c.role) <= MAX_NAME and not set(c.name + c.role) & set(":,")
    return ",".join(f"{c.name}:{c.role}" for c in table)


def markdown_table(table, pins=None):
    """The wiring table of docs/wiring.md: channel, name, direction, default role, use, and the header
    position of each pin when ``pins`` ({name: position text}) is given."""
    head = "| channel | pin | direction | default role | use |" + (" header |" if pins else "")
    rule = "|---|---|---|---|---|" + ("---|" if pins else "")
    rows = [head, rule]
    for c in table:
        row = (f"| {c.number} | `{c.name}` | {'output' if c.direction == 'out' else 'input'} | "
               f"{c.role or '-'} | {c.description} |")
        rows.append(row + (f" {pins[c.name]} |" if pins else ""))
    return "\n".join(rows) + "\n"
