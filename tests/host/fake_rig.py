"""A scripted rig on a local TCP port, speaking the protocol with hilat.protocol's encoders.

For host tests that need a rig misbehaving on purpose (silent, another version, a dropped link).
"""

import socket
import threading

from hilat import protocol as p


def identify(version=p.PROTOCOL_VERSION):
    return p.Identify(version=version, ts_hz=50_000_000, sys_hz=50_000_000, n_stimulus=2, n_inputs=4,
                      tag_channel=5, fifo_depth=1024, pin_to_stamp_delay=17, capabilities=0x3F,
                      firmware="fake", gateware="fake rig")


class FakeRig:
    """``script(conn, decoder, send)`` runs once a client connects; ``sent`` keeps every byte sent."""

    def __init__(self, script):
        self.script = script
        self.sent = bytearray()
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]
        self.url = f"socket://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        with conn:
            conn.settimeout(5)
            decoder = p.FrameDecoder(from_host=True)

            def send(data):
                self.sent += data
                conn.sendall(data)

            def receive():
                while True:
                    data = conn.recv(4096)
                    if not data:
                        return None
                    frames = decoder.feed(data)
                    if frames:
                        return frames
            try:
                self.script(receive, send)
            except (OSError, TimeoutError):
                pass

    def close(self):
        self.listener.close()
        self.thread.join(timeout=5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
