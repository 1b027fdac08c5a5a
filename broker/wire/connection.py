"""One client connection: read a request, handle it, write its response, then read the next.

As Kafka's SocketServer, which mutes a channel from the moment a request is received until its
response is sent, a connection reads nothing while a request is in hand: a client pipelining requests
finds them answered one at a time, in order, while what it sent waits in the socket (the frame
receiver reads at most 64 KiB ahead; TCP's window stops the client past that). A client that never
reads its responses stops being read too: the write waits for the socket to drain. Across the whole
broker at most `queued.max.requests` requests are in hand at once (Kafka's request queue bound);
past it, connections wait before handling the request they read.

One task per connection: no hand-off between a reader and a processor, which cost two turns of the
event loop per request.

A Fetch's big record sets are file regions (protocol/regions.py) sent with sendfile(2), as Kafka sends
FileRecords: the transport's buffer is emptied first, then the bytes go from the page cache to the
socket. Where the bytes must pass through the process anyway (TLS, a wire tap) they are read instead.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import errno
import os
from typing import TYPE_CHECKING

import structlog
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.dispatch import dispatch
from minikafka.broker.wire.errors import CloseConnection
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.framing import BadFrameSize, FrameReceiver, encode_frame
from minikafka.protocol.regions import FileRegion, materialized

if TYPE_CHECKING:
    from collections.abc import Sequence

    from minikafka.broker.security.session import Session
    from minikafka.broker.wire.cluster import Node
    from minikafka.broker.wire.services import BrokerServices

_log = structlog.get_logger("minikafka.connection")
# A producer pipelines its Produce requests: while the next one is already buffered, the answer to this one
# waits for it, so the pipeline is answered in one send() (on loopback each send also runs the client's
# receive path). Bounded so a long pipeline is still answered as it goes.
_MAX_HELD_RESPONSES = 8
# sendfile(2)'s errors for a pair of descriptors it cannot copy between (nothing sent yet).
_SENDFILE_UNSUPPORTED = frozenset((errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP))


class RequestSlots:
    """Kafka's queued.max.requests: at most `limit` requests in hand across every connection, later ones
    waiting their turn in arrival order. A free slot is taken without an await; asyncio.Semaphore's
    `async with` made seven Python calls for every request."""

    def __init__(self, limit: int) -> None:
        self._free = limit
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    def try_take(self) -> bool:
        if self._free and not self._waiters:
            self._free -= 1
            return True
        return False

    async def take(self) -> None:
        if self.try_take():
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await waiter  # `give_back` hands its slot over by resolving the oldest waiter
        except asyncio.CancelledError:
            if waiter.cancelled():
                self._waiters.remove(waiter)
            else:
                self.give_back()  # handed a slot while being cancelled: pass it on
            raise

    def give_back(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
        self._free += 1


class Connection:
    def __init__(
        self,
        connection_id: int,
        frames: FrameReceiver,
        writer: asyncio.StreamWriter,
        node: Node,
        services: BrokerServices,
        session: Session,
        request_slots: RequestSlots,
    ) -> None:
        self.connection_id = connection_id
        self.frames = frames
        self.writer = writer
        self.node = node
        self.services = services
        self.session = session
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        # True while a handler runs: shutdown lets it finish and the idle check leaves it alone.
        self.busy = False
        self.closing = False
        self.last_active = services.clock.monotonic()
        self._request_slots = request_slots
        self._request_context: RequestContext | None = None  # the context of the request being handled
        sock = writer.get_extra_info("socket")
        # The socket sendfile writes to; -1 where the bytes must go through the transport (TLS, or sendfile
        # found unsupported).
        self._sendfile_fd = (sock.fileno() if sock is not None and writer.get_extra_info("ssl_object") is None
                             and hasattr(os, "sendfile") else -1)

    def _context(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> RequestContext:
        self._request_context = RequestContext(
            api_key, api_version, correlation_id, client_id, self.connection_id, self.peer, self.node, self.services,
            self.session,
        )
        return self._request_context

    def _addresses(self) -> tuple[tuple[str, int], tuple[str, int]]:
        peer = self.writer.get_extra_info("peername")
        local = self.writer.get_extra_info("sockname")
        return ((str(peer[0]), int(peer[1])) if isinstance(peer, tuple) else (self.peer, 0),
                (str(local[0]), int(local[1])) if isinstance(local, tuple) else ("", 0))

    async def run(self) -> None:
        observers = self.services.observers
        if observers.taps:
            observers.tap("connection_opened", self.connection_id, *self._addresses())
        try:
            await self._serve_requests()
        finally:
            self.writer.close()
            if observers.taps:
                observers.tap("connection_closed", self.connection_id)

    async def _serve_requests(self) -> None:
        services = self.services
        observers = services.observers
        frames, writer, slots = self.frames, self.writer, self._request_slots
        # Responses not sent yet, as the buffers of their frames (a Fetch's record sets are parts of their own).
        held: list[bytes | memoryview | FileRegion] = []
        held_responses = 0
        try:
            while not self.closing:
                frame = await frames.read_frame()
                if frame is None:
                    return  # the client closed its sending side; everything it sent is answered
                self.last_active = services.clock.monotonic()
                if observers.taps:
                    observers.tap("frame", self.connection_id, True, encode_frame(frame))
                if not slots.try_take():
                    await slots.take()
                try:
                    self.busy = True
                    try:
                        response = await dispatch(frame, self._context)
                    finally:
                        self.busy = False
                    if response is not None:
                        parts: Sequence[bytes | memoryview | FileRegion] = response.parts()
                        if response.has_regions and observers.taps:
                            parts = materialized(parts)
                        if observers.taps:
                            observers.tap("frame", self.connection_id, False, b"".join(parts))  # type: ignore[arg-type]
                        held.extend(parts)
                        held_responses += 1
                        if frames.next_api_key() != ApiKey.PRODUCE or held_responses >= _MAX_HELD_RESPONSES:
                            # Taken out before sending: a send that fails part-way must not be sent again below.
                            sending, held, held_responses = held, [], 0
                            await self._send(sending)
                            # Returns at once below the transport's high-water mark; otherwise waits until the
                            # client has read enough, so at most one large response per connection is buffered.
                            await writer.drain()
                finally:
                    slots.give_back()
                context = self._request_context
                if context is not None and context.close_after_response:
                    _log.info("closing connection after the response", api=context.api_key,
                              connection_id=self.connection_id, peer=self.peer)
                    if held:
                        sending, held, held_responses = held, [], 0
                        await self._send(sending)
                    # Kafka delays the close (connection.failed.authentication.delay.ms) with the channel muted:
                    # it slows password guessing, and some clients (kafka-python) report the error only when the
                    # close comes after it. Real time, like the mute below.
                    await asyncio.sleep(services.config.failed_authentication_delay_ms / 1000)
                    return
                if context is not None and context.mute_ms:
                    if held:
                        sending, held, held_responses = held, [], 0
                        await self._send(sending)
                    # Real time: the client times its back-off in real time, manual clock or not.
                    await asyncio.sleep(context.mute_ms / 1000)
                self.last_active = services.clock.monotonic()
        except BadFrameSize as exc:
            services.metrics.count_closed_for_bad_input("frame size")
            _log.warning("closing connection", reason=str(exc), connection_id=self.connection_id, peer=self.peer)
        except (CloseConnection, InvalidRequest) as exc:
            if isinstance(exc, InvalidRequest):
                services.metrics.count_closed_for_bad_input("invalid request")
            elif exc.bad_input:
                services.metrics.count_closed_for_bad_input("unanswerable request")
            _log.warning("closing connection", reason=str(exc), connection_id=self.connection_id, peer=self.peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, possibly mid-request: nothing is owed to it
        except Exception:
            _log.exception("request failed; closing connection", connection_id=self.connection_id, peer=self.peer)
        finally:
            if held and not writer.is_closing():
                with contextlib.suppress(Exception):  # reading a file region can fail too; the connection ends anyway
                    writer.writelines(materialized(held))  # answered before the close, as the requests were read

    async def _send(self, parts: list[bytes | memoryview | FileRegion]) -> None:
        """Write `parts` in order: buffers through the transport, file regions with sendfile."""
        writer = self.writer
        if not any(type(part) is FileRegion for part in parts):
            writer.writelines(parts)  # type: ignore[arg-type]
            return
        start = 0
        for index, part in enumerate(parts):
            if type(part) is FileRegion:
                if index > start:
                    writer.writelines(parts[start:index])  # type: ignore[arg-type]
                start = index + 1
                if self._sendfile_fd < 0 or not await self._sendfile(part):
                    writer.write(part.read())  # TLS, or sendfile unsupported here: the bytes are read
        if start < len(parts):
            writer.writelines(parts[start:])  # type: ignore[arg-type]

    async def _sendfile(self, region: FileRegion) -> bool:
        """Send `region` with sendfile; False, with nothing sent, where sendfile cannot copy between its
        file and the socket (then not tried again on this connection)."""
        transport = self.writer.transport
        if transport.get_write_buffer_size():
            # sendfile writes to the socket itself: what the transport still holds must be sent before.
            low, high = transport.get_write_buffer_limits()
            transport.set_write_buffer_limits(high=0, low=0)
            try:
                await self.writer.drain()
            finally:
                transport.set_write_buffer_limits(high=high, low=low)
        position, remaining = region.offset, region.length
        waiter_fd = -1
        try:
            while remaining:
                if transport.is_closing():
                    raise ConnectionResetError("connection closed while sending a response")
                try:
                    sent = os.sendfile(self._sendfile_fd, region.fd, position, remaining)
                except BlockingIOError:
                    if waiter_fd < 0:
                        # uvloop refuses to watch a descriptor its transport owns; a duplicate is an epoll
                        # entry of its own for the same socket.
                        waiter_fd = os.dup(self._sendfile_fd)
                    await _writable(waiter_fd)
                    continue
                except OSError as exc:
                    if exc.errno not in _SENDFILE_UNSUPPORTED or position != region.offset:
                        raise
                    _log.info("sendfile unsupported here; record sets are read and written",
                              connection_id=self.connection_id, error=str(exc))
                    self._sendfile_fd = -1
                    return False
                if sent == 0:
                    raise EOFError(f"{region!r}: the file ended {remaining} bytes early")
                position += sent
                remaining -= sent
            return True
        finally:
            if waiter_fd >= 0:
                os.close(waiter_fd)


async def _writable(fd: int) -> None:
    """Wait until the socket `fd` can take more bytes (or has failed, which the next write reports)."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_writer(fd, wake)
    try:
        await ready
    finally:
        loop.remove_writer(fd)
