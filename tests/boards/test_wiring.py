"""docs/wiring.md's tables are made from the channel table and the boards' pin maps
(targets/wiring.py): the document must be what they give, and the check must notice a change."""

from targets import wiring


def test_wiring_doc_is_generated_from_the_channel_table():
    assert wiring.main(["--check"]) == 0, "docs/wiring.md is out of date: python -m targets.wiring"


def test_a_pin_change_shows_in_the_doc():
    parts = wiring.tables()
    text = wiring.DOC.read_text()
    assert wiring.render(text, parts) == text
    moved = {**parts, "colorlight_i5": parts["colorlight_i5"].replace("B20, P3 pin 3", "F20, P3 pin 4")}
    assert wiring.render(text, moved) != text
    # The rig table lists every channel of a default board build: 2 outputs, then 8 inputs.
    rows = [line for line in parts["channels"].splitlines() if line.startswith("| ") and "`" in line]
    assert [r.split("|")[2].strip() for r in rows] == ["`stim0`", "`stim1`"] + [f"`in{k}`" for k in range(8)]
