"""A TCP proxy that drops chosen responses: the broker has handled the request, the client never
hears back, so it must retry. Used to prove idempotent producers get exactly-once appends.

The proxy follows Kafka framing in both directions and pairs responses with requests in order
(Kafka answers in request order per connection), so it knows which response belongs to a Produce.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable

PRODUCE = 0


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
    prefix = read_exactly(sock, 4)
    if prefix is None:
        return None
    body = read_exactly(sock, struct.unpack(">i", prefix)[0])
    return None if body is None else prefix + body


class FaultProxy:
    """Listens on 127.0.0.1:`port`, forwards to `upstream`; `drop_produce(n)` decides the n-th Produce."""

    def __init__(self, port: int, drop_produce: Callable[[int], bool]) -> None:
        self.upstream: tuple[str, int] | None = None
        self.drop_produce = drop_produce
        self.dropped = 0
        self.produce_responses = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", port))
        self.port = self._listener.getsockname()[1]
        self._closing = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

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
            pending: deque[int] = deque()
            threading.Thread(target=self._client_to_server, args=(client, server, pending), daemon=True).start()
            threading.Thread(target=self._server_to_client, args=(client, server, pending), daemon=True).start()

    def _client_to_server(self, client: socket.socket, server: socket.socket, pending: deque[int]) -> None:
        while True:
            frame = read_frame(client)
            if frame is None:
                break
            api_key, _version = struct.unpack_from(">hh", frame, 4)
            acks = None
            if api_key == PRODUCE:
                acks = self._acks_of(frame)
            if acks != 0:
                pending.append(api_key)
            try:
                server.sendall(frame)
            except OSError:
                break
        self._close(client, server)

    @staticmethod
    def _acks_of(frame: bytes) -> int | None:
        # header v1/v2: key, version, correlation id, client id; then (v3+) transactional id, acks
        pos = 4 + 8
        (client_len,) = struct.unpack_from(">h", frame, pos)
        pos += 2 + max(client_len, 0)
        version = struct.unpack_from(">h", frame, 6)[0]
        if version >= 9:  # flexible: tagged fields in the header, compact transactional id
            pos += 1
            length = frame[pos] - 1
            pos += 1 + max(length, 0)
        else:
            (txn_len,) = struct.unpack_from(">h", frame, pos)
            pos += 2 + max(txn_len, 0)
        return struct.unpack_from(">h", frame, pos)[0]

    def _server_to_client(self, client: socket.socket, server: socket.socket, pending: deque[int]) -> None:
        while True:
            frame = read_frame(server)
            if frame is None:
                break
            api_key = pending.popleft() if pending else -1
            if api_key == PRODUCE:
                with self._lock:
                    self.produce_responses += 1
                    drop = self.drop_produce(self.produce_responses)
                    if drop:
                        self.dropped += 1
                if drop:
                    break
            try:
                client.sendall(frame)
            except OSError:
                break
        self._close(client, server)

    @staticmethod
    def _close(*sockets: socket.socket) -> None:
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self._closing = True
        self._listener.close()
        with self._lock:
            self._close(*self._sockets)
