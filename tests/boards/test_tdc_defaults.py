"""Which inputs ``--tdc`` gives a TDC on each board without the toolchain (docs/tdc.md, "Board builds"):
the first 4 in a build with the engine or Ethernet, all 8 in one with neither, ``--tdc-inputs`` over
both; a count the build does not have is refused in one line. The SoC is elaborated from the board's
own command line (about 2 s each), nothing is synthesized."""

import pytest

from targets import colorlight_i5, colorlight_i9, ulx3s


def _soc(target, argv):
    parser = target.make_parser()
    args = parser.parse_args(argv)
    if target is colorlight_i9:
        return colorlight_i5.build_soc(args, parser, colorlight_i9.BOARD, colorlight_i9.MODULE)
    return target.build_soc(args, parser)


@pytest.mark.parametrize("target, argv, inputs", [
    (colorlight_i5, ["--tdc"], 4),                       # Ethernet, its default
    (colorlight_i5, ["--tdc", "--no-ethernet"], 8),
    (colorlight_i9, ["--tdc"], 4),                       # engine + Ethernet
    (ulx3s, ["--tdc", "--no-engine", "--tdc-inputs", "3"], 3),
])
def test_tdc_inputs(target, argv, inputs):
    soc = _soc(target, argv)
    assert soc.tdc.n_inputs == len(soc.tdc.tdcs) == inputs
    assert soc.capture.fraction_total_bits == 8 * inputs


def test_tdc_inputs_out_of_range_refused():
    with pytest.raises(SystemExit, match=r"--tdc-inputs 9: 1 \.\. 8"):
        _soc(colorlight_i5, ["--tdc", "--tdc-inputs", "9"])
