"""A network rig's URL is locked per network namespace: 192.168.1.50 in the namespace a test made is
not the 192.168.1.50 of the machine (or of another test's namespace)."""

import pytest
from hilat.link.transport import Transport, TransportError

from targets import netns

# The loopback address exists in every namespace (a new one has only `lo`), so the URL opens in both.
URL = "udp://127.0.0.1:5800"


def _open_and_close(url):
    with Transport(url):
        return "opened"


def test_a_second_hilat_is_refused_in_the_same_namespace_and_not_in_another():
    reason = netns.unavailable_reason()
    if reason:
        pytest.skip(reason)
    # Connecting a UDP socket sends nothing: the lock is what is tested, in namespaces of our own.
    netns.call(_hold_and_try_again, URL)


def _hold_and_try_again(url):
    with Transport(url):
        with pytest.raises(TransportError, match=r"in use by another hilat"):
            Transport(url)
        assert netns.call(_open_and_close, url) == "opened"
