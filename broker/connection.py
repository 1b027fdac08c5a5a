"""One client connection: read a frame, dispatch it, write the response, in request order.

Requests on a connection are handled one at a time, as Kafka mutes a channel until its response is
sent, so responses can never be reordered. Clients pipeline anyway: their next requests wait in the
socket buffer meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import structlog
from minikafka.protocol.errors import InvalidRequest
from minikafka.protocol.framing import BadFrameSize, read_frame

from .context import RequestContext
from .dispatch import CloseConnection, dispatch

if TYPE_CHECKING:
    from .cluster import Node
    from .services import BrokerServices

_log = structlog.get_logger("minikafka.connection")

# Past this many unsent bytes we wait for the socket to drain before reading more requests.
_WRITE_HIGH_WATER = 4 * 1024 * 1024


class Connection:
    def __init__(
        self,
        connection_id: int,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        node: Node,
        services: BrokerServices,
    ) -> None:
        self.connection_id = connection_id
        self.reader = reader
        self.writer = writer
        self.node = node
        self.services = services
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.busy = False
        self.closing = False
        self.last_active = services.clock.monotonic()

    def _context(self, api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> RequestContext:
        return RequestContext(
            api_key, api_version, correlation_id, client_id, self.connection_id, self.peer, self.node, self.services
        )

    async def run(self) -> None:
        max_bytes = self.services.config.socket_request_max_bytes
        transport = self.writer.transport
        try:
            while not self.closing:
                frame = await read_frame(self.reader, max_bytes)
                if frame is None:
                    return
                self.busy = True
                self.last_active = self.services.clock.monotonic()
                try:
                    response = await dispatch(frame, self._context)
                finally:
                    self.busy = False
                if response is not None:
                    self.writer.write(response)
                    if transport.get_write_buffer_size() > _WRITE_HIGH_WATER:
                        await self.writer.drain()
        except (CloseConnection, InvalidRequest, BadFrameSize) as exc:
            _log.warning("closing connection", reason=str(exc), connection_id=self.connection_id, peer=self.peer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            raise
        except Exception:
            _log.exception("request failed; closing connection", connection_id=self.connection_id, peer=self.peer)
        finally:
            self.writer.close()
