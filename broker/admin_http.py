"""The optional admin listener: a small JSON API over HTTP/1.1 for tests in any language.

    GET    /health          {"status": "ok"}
    GET    /faults          {"faults": [rule, ...]}
    POST   /faults          body: one rule (broker/faults.py) -> 201 {"fault": rule}
    DELETE /faults          {"removed": N}
    GET    /faults/{id}     {"fault": rule}, or 404
    DELETE /faults/{id}     {"removed": 1}, or 404
    GET    /state           topics, partitions, producers and groups (state_snapshot below)

Off unless `admin.listener.port` (`--admin-port`) is set; binds 127.0.0.1 unless
`admin.listener.host` says otherwise, since anyone who reaches it can make the broker fail.
One request per connection (`Connection: close`), plain asyncio streams, no dependency. Bad input
is answered 4xx with {"error": "..."}; the request head and body are bounded, as are the time a
request may take to arrive and the connections held at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import TYPE_CHECKING, Any

import structlog

from .faults import FaultSpecError

if TYPE_CHECKING:
    from .services import BrokerServices

_log = structlog.get_logger("minikafka.admin")

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
REQUEST_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 32
_DISCARD_S = 1.0
_DISCARD_BYTES = 1024 * 1024
_REASONS = {200: "OK", 201: "Created", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            408: "Request Timeout", 411: "Length Required", 413: "Content Too Large",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable"}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def state_snapshot(services: BrokerServices) -> dict[str, Any]:
    """What the broker holds, as JSON: user topics with their partitions' offsets and producers, and the
    groups with their generation, members and committed offsets. Internal topics are left out."""
    logs = services.logs
    topics: dict[str, Any] = {}
    for meta in sorted(logs.topics(), key=lambda meta: meta.name):
        if meta.internal:
            continue
        partitions: dict[str, Any] = {}
        for index in range(meta.partitions):
            log = logs.partition(meta.name, index)
            if log is None:
                continue
            partitions[str(index)] = {
                "log_start_offset": log.log_start_offset,
                "high_watermark": log.high_watermark,
                "last_stable_offset": log.last_stable_offset,
                "log_end_offset": log.log_end_offset,
                "segments": len(log.segments),
                "producers": [
                    {"producer_id": entry.producer_id, "epoch": entry.epoch, "last_sequence": entry.last_seq,
                     "open_transaction_first_offset":
                         entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None}
                    for entry in sorted(log.producer_state.entries.values(), key=lambda e: e.producer_id)
                ],
            }
        topics[meta.name] = {"topic_id": str(meta.topic_id), "partitions": partitions}
    coordinator = services.groups
    groups: dict[str, Any] = {}
    for group_id in sorted(set(coordinator.groups) | set(coordinator.offsets.groups())):
        group = coordinator.groups.get(group_id)
        committed: dict[str, dict[str, int]] = {}
        for (topic, partition), offset in sorted(coordinator.offsets.partitions(group_id).items()):
            committed.setdefault(topic, {})[str(partition)] = offset.offset
        groups[group_id] = {
            "state": group.state.value if group is not None else "Empty",
            "generation": group.generation_id if group is not None else 0,
            "protocol_type": group.protocol_type if group is not None else None,
            "protocol": group.protocol_name if group is not None else None,
            "leader": group.leader_id if group is not None else None,
            "members": [] if group is None else [
                {"member_id": member.member_id, "group_instance_id": member.group_instance_id,
                 "client_id": member.client_id, "client_host": member.client_host}
                for member in group.members.values()
            ],
            "committed": committed,
        }
    return {"topics": topics, "groups": groups}


async def _discard_unread(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After answering a request that was not read to its end: closing with unread bytes would reset the
    connection, and a reset can destroy the answer before the client reads it. So the sending side is
    shut and what the client still sends is read and dropped, for a bounded time and size."""
    if not writer.can_write_eof():
        return
    writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(_DISCARD_S):
            for _ in range(_DISCARD_BYTES // MAX_HEAD_BYTES):
                if not await reader.read(MAX_HEAD_BYTES):
                    break


class AdminListener:
    def __init__(self, services: BrokerServices, host: str, port: int) -> None:
        self.services = services
        self.host = host
        self.requested_port = port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections = 0

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                                  limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        _log.info("admin listener ready", host=self.host, port=self.port)
        return self.port

    def abort(self) -> None:
        """Stop listening at once (a crash); open admin connections end with the loop."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        try:
            if self._connections > MAX_CONNECTIONS:
                status, body = 503, {"error": f"more than {MAX_CONNECTIONS} admin connections"}
            else:
                try:
                    async with asyncio.timeout(REQUEST_TIMEOUT_S):
                        status, body = await self._respond(reader)
                except TimeoutError:
                    status, body = 408, {"error": f"no complete request within {REQUEST_TIMEOUT_S:g}s"}
                except HttpError as exc:
                    status, body = exc.status, {"error": str(exc)}
                except (ConnectionError, asyncio.IncompleteReadError):
                    return  # the client went away mid-request
                except Exception:  # a bug here must not take the broker down; the client gets a 500
                    _log.exception("admin request failed")
                    status, body = 500, {"error": "internal error; see the broker log"}
            payload = json.dumps(body).encode()
            writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                         f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                         "Connection: close\r\n\r\n".encode() + payload)
            await writer.drain()
            if status >= 400:
                await _discard_unread(reader, writer)
        except ConnectionError:
            pass
        finally:
            self._connections -= 1
            writer.close()

    async def _respond(self, reader: asyncio.StreamReader) -> tuple[int, Any]:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, f"request head over {MAX_HEAD_BYTES} bytes") from None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "malformed request line")
        method, target = parts[0], parts[1]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise HttpError(400, f"malformed header line {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise HttpError(411, "send the body with Content-Length, not chunked")
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise HttpError(400, f"bad Content-Length {length_text[:20]!r}")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise HttpError(413, f"body over {MAX_BODY_BYTES} bytes")
        body = await reader.readexactly(length) if length else b""
        return self._route(method, target.split("?", 1)[0].rstrip("/") or "/", body)

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        faults = self.services.faults
        if path == "/health":
            self._allow(method, "GET")
            return 200, {"status": "ok"}
        if path == "/state":
            self._allow(method, "GET")
            return 200, state_snapshot(self.services)
        if path == "/faults":
            self._allow(method, "GET", "POST", "DELETE")
            if method == "GET":
                return 200, {"faults": faults.list()}
            if method == "DELETE":
                return 200, {"removed": faults.clear()}
            try:
                spec = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise HttpError(400, f"body is not JSON: {exc}") from None
            try:
                rule = faults.add(spec)
            except FaultSpecError as exc:
                raise HttpError(400, str(exc)) from None
            return 201, {"fault": rule.to_json()}
        if path.startswith("/faults/"):
            self._allow(method, "GET", "DELETE")
            rule_id_text = path.removeprefix("/faults/")
            if not rule_id_text.isdigit():
                raise HttpError(404, f"no fault rule {rule_id_text[:40]!r}")
            found = faults.rules.get(int(rule_id_text))
            if found is None:
                raise HttpError(404, f"no fault rule {rule_id_text}")
            if method == "GET":
                return 200, {"fault": found.to_json()}
            faults.remove(found.id)
            return 200, {"removed": 1}
        raise HttpError(404, f"no such resource {path[:80]!r}; see GET /health, /faults, /state")

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"{method[:20]} not allowed here; use {', '.join(allowed)}")
