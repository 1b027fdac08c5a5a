"""Kafka's size-prefixed framing, with the size guard applied before any allocation.

`FrameReceiver` is the protocol a broker connection's transport reads into: the socket is read
straight into the buffer a frame ends up in (asyncio's BufferedProtocol), where a StreamReader would
copy each chunk three times (the transport's bytes, its buffer, readexactly's result). A Produce of a
few hundred KiB spent a fifth of the broker's CPU in those copies.
"""

from __future__ import annotations

import asyncio
import collections
import struct

_SIZE = struct.Struct(">i")
# Frames up to this size are read through the shared buffer and copied out once; bigger ones get their
# own buffer, which the socket fills directly.
_SMALL_FRAME = 16 * 1024
_BUFFER_SIZE = 64 * 1024
# A connection's shared buffer starts this small (ApiVersions, Metadata and the other requests of an
# admin or idle client fit) and becomes _BUFFER_SIZE the first time a read fills it or a frame cannot
# fit in it: zeroing 64 KiB for every new connection was a twentieth of its setup CPU, and each idle
# connection held 64 KiB.
_FIRST_BUFFER_SIZE = 4 * 1024
# A frame's own buffer starts at most this big and doubles as bytes arrive, so a size prefix alone
# (up to socket.request.max.bytes) reserves no memory the client has not sent.
_FIRST_BODY_CAPACITY = 1024 * 1024
# Where a connection that stopped reading (a bad frame) lets what still arrives go. One for all: its bytes
# are never read, and 4 KiB more for every connection was a quarter of an idle one's memory.
_DISCARDED = bytearray(4096)


class BadFrameSize(Exception):
    """A frame size outside (0, max_bytes]: the connection must be closed."""

    def __init__(self, size: int, max_bytes: int) -> None:
        super().__init__(f"frame size {size} outside (0, {max_bytes}]")
        self.size = size


def encode_frame(body: bytes | bytearray) -> bytes:
    return _SIZE.pack(len(body)) + body


class _WriteFlow(asyncio.streams.FlowControlMixin):
    """What a StreamWriter needs of its protocol (drain's pause/resume, the close waiter). A separate
    object because the transport reads into a BufferedProtocol, which must not be a Protocol."""

    def __init__(self) -> None:
        super().__init__()
        self._closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        if not self._closed.done():
            self._closed.set_result(None)

    def _get_close_waiter(self, stream: asyncio.StreamWriter) -> asyncio.Future[None]:
        return self._closed


class FrameReceiver(asyncio.BufferedProtocol):
    """Whole request frames read from a connection, in order.

    At most about `limit` bytes of complete frames wait to be handled before reading pauses (TCP's
    window then stops the client), as a StreamReader with that limit would. A size outside
    (0, max_bytes] raises BadFrameSize from `read_frame` once the frames before it are handled."""

    def __init__(self, max_bytes: int, limit: int = _BUFFER_SIZE) -> None:
        self.max_bytes = max_bytes
        self.limit = limit
        self.write_flow = _WriteFlow()
        self._transport: asyncio.BaseTransport | None = None
        self._buffer = bytearray(_FIRST_BUFFER_SIZE)
        self._start = 0  # unread bytes of the shared buffer: [_start, _end)
        self._end = 0
        self._body: bytearray | None = None  # a big frame's own buffer, being filled
        self._body_size = 0
        self._body_filled = 0
        self._frames: collections.deque[bytes | bytearray] = collections.deque()
        self._queued_bytes = 0
        self._paused = False
        self._eof = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None
        self._over_ssl = False

    # --- protocol side: called by the transport -----------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport
        self._over_ssl = transport.get_extra_info("sslcontext") is not None
        self.write_flow.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self._eof = True
        if exc is not None and self._error is None:
            self._error = exc
        self._wake()
        self.write_flow.connection_lost(exc)

    def pause_writing(self) -> None:
        self.write_flow.pause_writing()

    def resume_writing(self) -> None:
        self.write_flow.resume_writing()

    def eof_received(self) -> bool:
        self._eof = True
        self._wake()
        # Keep the transport open to answer what was sent before the EOF (TLS cannot half-close).
        return not self._over_ssl

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._error is not None:
            return memoryview(_DISCARDED)  # reading is paused; what still arrives is not wanted
        body = self._body
        if body is not None:
            if self._body_filled == len(body):
                # Grown as the bytes arrive, never far ahead of them. A new buffer rather than a resize:
                # the transport may still hold a view of the old one.
                grown = bytearray(min(2 * len(body), self._body_size))
                grown[:self._body_filled] = body
                self._body = body = grown
            return memoryview(body)[self._body_filled:]
        if self._start and len(self._buffer) - self._end < _SMALL_FRAME + 4:
            self._compact()  # what is unread is less than a small frame and its size: room for one
        return memoryview(self._buffer)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._error is not None:
            return
        if self._body is not None:
            self._body_filled += nbytes
            if self._body_filled == self._body_size:
                self._queue(self._body)
                self._body, self._body_filled = None, 0
        else:
            self._end += nbytes
            filled = self._end == len(self._buffer)
            self._split_frames()
            if filled and len(self._buffer) < _BUFFER_SIZE:
                self._grow()  # the client sends more than the first buffer holds: more may be waiting
        if self._error is not None:
            self._wake()
            self._pause()
        elif self._frames:
            self._wake()
            if self._queued_bytes >= self.limit:
                self._pause()

    def _pause(self) -> None:
        if not self._paused and self._transport is not None:
            self._paused = True
            self._transport.pause_reading()  # type: ignore[attr-defined]

    def _compact(self) -> None:
        unread = self._end - self._start
        self._buffer[:unread] = self._buffer[self._start:self._end]
        self._start, self._end = 0, unread

    def _grow(self) -> None:
        """Move to a full-size buffer. A new one: the transport may still hold a view of the old one."""
        unread = self._end - self._start
        grown = bytearray(_BUFFER_SIZE)
        grown[:unread] = self._buffer[self._start:self._end]
        self._buffer, self._start, self._end = grown, 0, unread

    def _split_frames(self) -> None:
        buffer = self._buffer
        while self._error is None and self._end - self._start >= 4:
            (size,) = _SIZE.unpack_from(buffer, self._start)
            if size <= 0 or size > self.max_bytes:
                self._error = BadFrameSize(size, self.max_bytes)
                break
            available = self._end - self._start - 4
            body_start = self._start + 4
            if available >= size:
                self._queue(bytes(buffer[body_start:body_start + size]))
                self._start = body_start + size
            elif size > _SMALL_FRAME:
                self._body = bytearray(min(size, max(_FIRST_BODY_CAPACITY, available)))
                self._body[:available] = memoryview(buffer)[body_start:self._end]
                self._body_size, self._body_filled = size, available
                self._start = self._end = 0
                return
            else:
                if size + 4 > len(buffer):
                    self._grow()  # a small frame, but bigger than the first buffer
                break  # the rest of a small frame: get_buffer makes room for it
        if self._start == self._end:
            self._start = self._end = 0

    def _queue(self, frame: bytes | bytearray) -> None:
        self._frames.append(frame)
        self._queued_bytes += len(frame)

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    # --- reader side: the connection's task ---------------------------------------------------------

    async def read_frame(self) -> bytes | bytearray | None:
        """The next frame body; None on a clean EOF between frames.

        Raises BadFrameSize for a size outside (0, max_bytes], asyncio.IncompleteReadError for a
        connection closed mid-frame, and the transport's error for a connection lost with one."""
        while not self._frames:
            if isinstance(self._error, BadFrameSize):
                raise self._error
            if self._eof:
                if self._error is not None:
                    raise self._error
                partial = self._end - self._start + self._body_filled
                if partial:
                    raise asyncio.IncompleteReadError(b"", None)
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        frame = self._frames.popleft()
        self._queued_bytes -= len(frame)
        if self._paused and self._queued_bytes < self.limit and self._error is None and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()  # type: ignore[attr-defined]
        return frame

    @property
    def queued_bytes(self) -> int:
        """Bytes of whole frames received and not yet read."""
        return self._queued_bytes

    def next_api_key(self) -> int | None:
        """The API key of the next whole frame already received, or None."""
        if not self._frames:
            return None
        frame = self._frames[0]
        if len(frame) < 2:
            return None
        return int.from_bytes(frame[0:2], "big", signed=True)
