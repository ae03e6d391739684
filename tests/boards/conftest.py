"""The Colorlight i5 bitstream build (several minutes of nextpnr on one core) starts as soon as the
tests are collected, in the background, so that it runs beside the rest of the suite on this two-core
machine; tests/boards/test_bitstream.py starts it and waits for it. Its tests run last, so the wait
comes after everything else rather than in the middle of it."""

BITSTREAM_TESTS = "tests/boards/test_bitstream.py"


def pytest_collection_modifyitems(session, config, items):
    items.sort(key=lambda item: item.nodeid.startswith(BITSTREAM_TESTS))   # stable: the rest keep their order


def pytest_collection_finish(session):
    if session.config.option.collectonly:
        return
    if any(item.nodeid.startswith(BITSTREAM_TESTS) for item in session.items):
        import test_bitstream

        test_bitstream.start_build()


def pytest_sessionfinish(session):
    import sys

    module = sys.modules.get("test_bitstream")
    if module is not None:
        module.stop_build()
