"""One client connection: read requests, handle them one at a time, write responses in request order.

Two loops share a connection. The reader reads frames ahead into a queue of at most
`queued.max.requests` requests and about `socket.request.max.bytes` bytes; the processor takes
them in order, dispatches each, writes its response, and waits for the socket to take it (Kafka
mutes a channel while its response is being sent). The reader waits for the same drain before
each frame, so a client that sends requests and never reads its responses stops being read: the
broker holds one response and a bounded queue of requests for it, never a growing pile of
responses. Past that, TCP's own window stops the client.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.framing import BadFrameSize, encode_frame, read_frame

from .context import RequestContext
from .dispatch import CloseConnection, dispatch

if TYPE_CHECKING:
    from .cluster import Node
    from .security.session import Session
    from .services import BrokerServices

_log = structlog.get_logger("minikafka.connection")


class _EndOfRequests:
    """Queued after the last request of a client that closed its side cleanly."""


_END = _EndOfRequests()


class Connection:
    def __init__(
        self,
        connection_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        node: Node,
        services: BrokerServices,
        session: Session,
    ) -> None:
        self.connection_id = connection_id
        self.reader = reader
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
        self._requests: asyncio.Queue[bytes | _EndOfRequests] = asyncio.Queue(
            maxsize=services.config.queued_max_requests)
        # Bytes of the frames in the queue: reading ahead pauses at socket.request.max.bytes, so a client
        # pipelining big requests behind a slow one holds about that much, not queued.max.requests frames.
        self._queued_bytes = 0
        self._queue_drained = asyncio.Event()
        self._request_context: RequestContext | None = None  # the context of the request being handled

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
        taps = self.services.observers.taps
        if taps:
            self.services.observers.tap("connection_opened", self.connection_id, *self._addresses())
        reading = asyncio.create_task(self._read_requests(), name=f"connection-{self.connection_id}-read")
        processing = asyncio.create_task(self._process_requests(), name=f"connection-{self.connection_id}-process")
        try:
            done, _pending = await asyncio.wait((reading, processing), return_when=asyncio.FIRST_COMPLETED)
            if reading in done and reading.result():
                # The client closed its sending side: answer what it sent before closing ours.
                await processing
        finally:
            for task in (reading, processing):
                task.cancel()
            await asyncio.gather(reading, processing, return_exceptions=True)
            self.writer.close()
            if self.services.observers.taps:
                self.services.observers.tap("connection_closed", self.connection_id)

    async def _read_requests(self) -> bool:
        """Queue frames until the client or the broker stops; True when what was read is still to be answered
        (a clean end of stream, or shutdown), False when the client went away or broke the framing."""
        max_bytes = self.services.config.socket_request_max_bytes
        try:
            while not self.closing:
                # Not reading while the client leaves its responses unread: the mute of Kafka's SocketServer.
                await self.writer.drain()
                frame = await read_frame(self.reader, max_bytes)
                if frame is None:
                    await self._requests.put(_END)
                    return True
                self.last_active = self.services.clock.monotonic()
                if self.services.observers.taps:
                    self.services.observers.tap("frame", self.connection_id, True, encode_frame(frame))
                await self._requests.put(frame)
                self._queued_bytes += len(frame)
                while self._queued_bytes >= max_bytes:
                    self._queue_drained.clear()
                    await self._queue_drained.wait()
            return True  # shutting down: no more requests are read, the one being handled finishes
        except BadFrameSize as exc:
            self.services.metrics.count_closed_for_bad_input("frame size")
            _log.warning("closing connection", reason=str(exc), connection_id=self.connection_id, peer=self.peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away, possibly mid-request: nothing is owed to it
        return False

    async def _process_requests(self) -> None:
        try:
            while not self.closing:
                frame = await self._requests.get()
                if isinstance(frame, _EndOfRequests):
                    return
                self._queued_bytes -= len(frame)
                self._queue_drained.set()
                self.busy = True
                try:
                    response = await dispatch(frame, self._context)
                finally:
                    self.busy = False
                if response is not None:
                    if self.services.observers.taps:
                        self.services.observers.tap("frame", self.connection_id, False, response)
                    self.writer.write(response)
                    # Returns at once below the transport's high-water mark; otherwise waits until the
                    # client has read enough, so at most one large response per connection is buffered.
                    await self.writer.drain()
                context = self._request_context
                if context is not None and context.close_after_response:
                    _log.info("closing connection after the response", api=context.api_key,
                              connection_id=self.connection_id, peer=self.peer)
                    return
                if context is not None and context.mute_ms:
                    # Real time: the client times its back-off in real time, manual clock or not.
                    await asyncio.sleep(context.mute_ms / 1000)
                self.last_active = self.services.clock.monotonic()
        except (CloseConnection, InvalidRequest) as exc:
            if isinstance(exc, InvalidRequest):
                self.services.metrics.count_closed_for_bad_input("invalid request")
            elif exc.bad_input:
                self.services.metrics.count_closed_for_bad_input("unanswerable request")
            _log.warning("closing connection", reason=str(exc), connection_id=self.connection_id, peer=self.peer)
        except ConnectionError:
            pass
        except Exception:
            _log.exception("request failed; closing connection", connection_id=self.connection_id, peer=self.peer)
