"""A TCP proxy that drops chosen responses: the broker has handled the request, the client never
hears back, so it must retry. Used to prove idempotent producers get exactly-once appends.

It pairs responses with requests in order (Kafka answers in request order per connection), so it
knows which response belongs to a Produce.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable

from tests.framing_proxy import FrameHandler, FramingProxy

PRODUCE = 0


def _acks_of(frame: bytes) -> int:
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
    return int(struct.unpack_from(">h", frame, pos)[0])


class FaultProxy(FramingProxy):
    """Forwards to `upstream`; `drop_produce(n)` decides whether the n-th Produce response is dropped
    (the connection is then cut, as a network failure between the broker's answer and the client)."""

    def __init__(self, port: int, drop_produce: Callable[[int], bool]) -> None:
        self.drop_produce = drop_produce
        self.dropped = 0
        self.produce_responses = 0
        super().__init__(port)

    def frame_handlers(self) -> tuple[FrameHandler, FrameHandler]:
        awaiting: deque[int] = deque()  # API keys of the requests whose responses are due, in order

        def request(frame: bytes) -> bool:
            (api_key,) = struct.unpack_from(">h", frame, 4)
            if api_key != PRODUCE or _acks_of(frame) != 0:
                awaiting.append(api_key)
            return True

        def response(_frame: bytes) -> bool:
            if (awaiting.popleft() if awaiting else -1) != PRODUCE:
                return True
            with self._lock:
                self.produce_responses += 1
                drop = self.drop_produce(self.produce_responses)
                self.dropped += drop
            return not drop

        return request, response
