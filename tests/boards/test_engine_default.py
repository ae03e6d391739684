"""Which board builds have the measurement engine by default: the ULX3S with the LFE5U-45F and -85F
(where it meets timing), not with the 25F, nor the Colorlight i5 (LFE5U-25F: met with some nextpnr
seeds only); --engine and --no-engine decide over the default."""

import pytest

from targets import colorlight_i5, ulx3s


@pytest.mark.parametrize("argv, engine", [
    ([], True),
    (["--device", "LFE5U-85F"], True),
    (["--device", "LFE5U-25F"], False),
    (["--no-engine"], False),
    (["--device", "LFE5U-25F", "--engine"], True),
])
def test_ulx3s_engine_default_follows_the_device(argv, engine):
    assert ulx3s.engine_for(ulx3s.make_parser().parse_args(argv)) is engine


def test_colorlight_i5_engine_off_unless_asked():
    assert colorlight_i5.make_parser().parse_args([]).engine is False
    assert colorlight_i5.make_parser().parse_args(["--engine"]).engine is True
