"""A TCP proxy that follows Kafka framing both ways, for tests that watch or tamper with a conversation.

Each accepted connection gets its own connection to `upstream` and two threads, one per direction, that
hand every whole frame (size prefix included) to a callback before forwarding it. A callback returning
False ends that connection: both sockets are shut down, as when a network path dies mid-conversation.
Subclasses say what to do with frames through `frame_handlers`, called once per connection so that
per-connection state (the requests awaiting their responses) lives in its closures.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

FrameHandler = Callable[[bytes], bool]


def read_exactly(sock: socket.socket, count: int) -> bytes | None:
    data = bytearray()
    while len(data) < count:
        try:
            chunk = sock.recv(count - len(data))
        except OSError:
            return None
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def read_frame(sock: socket.socket) -> bytes | None:
    """One frame with its size prefix; None when the peer is gone."""
    prefix = read_exactly(sock, 4)
    if prefix is None:
        return None
    body = read_exactly(sock, struct.unpack(">i", prefix)[0])
    return None if body is None else prefix + body


class FramingProxy:
    """Listens on 127.0.0.1:`port` (0: a free one) and forwards to `upstream`, set once the broker is up."""

    def __init__(self, port: int = 0) -> None:
        self.upstream: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = self._listener.getsockname()[1]
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def frame_handlers(self) -> tuple[FrameHandler, FrameHandler]:
        """(client-to-broker, broker-to-client) callbacks for one new connection; both forward everything."""
        return (lambda _frame: True), (lambda _frame: True)

    def _accept(self) -> None:
        while not self._closing:
            try:
                client, _addr = self._listener.accept()
            except OSError:
                return
            if self.upstream is None:
                client.close()
                continue
            try:
                server = socket.create_connection(self.upstream, timeout=10)
                server.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, server]
            to_server, to_client = self.frame_handlers()
            threading.Thread(target=self._pump, args=(client, server, to_server), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, to_client), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, on_frame: FrameHandler) -> None:
        while (frame := read_frame(source)) is not None:
            if not on_frame(frame):
                break
            try:
                sink.sendall(frame)
            except OSError:
                break
        self._shut(source, sink)

    @staticmethod
    def _shut(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        with self._lock:
            self._shut(*self._sockets)
