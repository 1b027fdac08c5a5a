"""A small HTTP/1.1 server on asyncio streams for the schema registry: persistent connections (the
registry clients keep theirs open), bounded request heads and bodies, a time limit on reading a request,
a cap on connections, optional TLS. The registry's routes (broker/registry/api.py) turn a `Request`
into a `Response`; this module never raises to the client: every failure is an answer.

Why not broker/control/admin_http.py's reader: the control room sits above this one, and the admin API
answers one request per connection, which would make every registry call a new TCP (and TLS) handshake.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import json
import ssl
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import structlog

_log = structlog.get_logger("minikafka.schema_registry")

MAX_HEAD_BYTES = 16 * 1024
# Schemas are small; Confluent's clients send one schema (and its reference names) per request.
MAX_BODY_BYTES = 4 * 1024 * 1024
REQUEST_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0
MAX_CONNECTIONS = 256
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# The request line's HTTP version, kept with the headers under a name no header can have (it has a space).
_VERSION = " version"
_REASONS = {
    200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 409: "Conflict", 411: "Length Required", 413: "Content Too Large",
    415: "Unsupported Media Type", 422: "Unprocessable Entity", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    peer: str = ""  # the client's "host:port", for the flight recorder


@dataclass
class Response:
    status: int
    body: Any  # JSON, unless `raw`
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None  # sent as it is (a schema's own text)


def error(status: int, error_code: int, message: str) -> Response:
    """Confluent's error body."""
    return Response(status, {"error_code": error_code, "message": message})


class _Refused(Exception):
    def __init__(self, response: Response, close: bool = True) -> None:
        super().__init__(response.body)
        self.response = response
        self.close = close


Handler = Callable[[Request], Awaitable[Response]]
# user, password -> may this user in (HTTP basic auth); None: no authentication.
Authenticator = Callable[[str, str], bool]


def _unauthorized() -> Response:
    return Response(401, {"error_code": 401, "message": "Unauthorized"},
                    {"WWW-Authenticate": 'Basic realm="SchemaRegistry"'})


def basic_credentials(header: str) -> tuple[str, str] | None:
    """The user and password of an `Authorization: Basic ...` header (RFC 7617), or None."""
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep else None


class HttpServer:
    def __init__(self, handle: Handler, host: str, port: int, tls: ssl.SSLContext | None = None,
                 authenticate: Authenticator | None = None) -> None:
        self._handle = handle
        self._authenticate = authenticate
        self.host = host
        self.requested_port = port
        self.port = 0
        self._tls = tls
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.StreamWriter] = set()

    @property
    def scheme(self) -> str:
        return "https" if self._tls is not None else "http"

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                                  limit=MAX_HEAD_BYTES, ssl=self._tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    def abort(self) -> None:
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in tuple(self._connections):
                writer.close()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(5):
                    await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections.add(writer)
        try:
            if len(self._connections) > MAX_CONNECTIONS:
                await _write(writer, error(503, 50003, f"more than {MAX_CONNECTIONS} connections"), close=True)
                return
            first = True
            while True:
                try:
                    request = await self._next_request(reader, writer, first)
                except _Refused as refused:
                    await _write(writer, refused.response, close=True)
                    await _discard_unread(reader)
                    return
                if request is None:
                    return
                first = False
                close = _closes(request)
                await _write(writer, await self._answer(request), close=close)
                if close:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass  # the client went away
        finally:
            self._connections.discard(writer)
            writer.close()

    async def _answer(self, request: Request) -> Response:
        if self._authenticate is not None:
            credentials = basic_credentials(request.headers.get("authorization", ""))
            if credentials is None or not self._authenticate(*credentials):
                return _unauthorized()
        try:
            return await self._handle(request)
        except Exception:  # a bug must not take the broker down, nor show the client a traceback
            _log.exception("schema registry request failed", method=request.method, path=request.path)
            return error(500, 50001, "Error in the backend data store; see the broker log")

    async def _next_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            first: bool) -> Request | None:
        """The next request, or None when the client closed the connection between requests."""
        try:
            async with asyncio.timeout(REQUEST_TIMEOUT_S if first else IDLE_TIMEOUT_S):
                head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                raise _Refused(error(400, 400, "incomplete request")) from None
            return None
        except asyncio.LimitOverrunError:
            raise _Refused(error(431, 431, f"request head over {MAX_HEAD_BYTES} bytes")) from None
        except TimeoutError:
            if first:
                raise _Refused(error(408, 408, f"no request within {REQUEST_TIMEOUT_S:g}s")) from None
            return None
        method, target, headers = _parse_head(head)
        if headers.get("expect", "").lower() == "100-continue" and headers.get("content-length", "0") != "0":
            # curl asks before sending a body over 1 KiB, and waits a second for this unless answered.
            _check_length(headers)
            writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await writer.drain()
        body = await _read_body(reader, headers)
        path, _, query_text = target.partition("?")
        query = {key: values[-1] for key, values in urllib.parse.parse_qs(query_text, keep_blank_values=True).items()}
        return Request(method, path, query, headers, body, _peer(writer))


def _peer(writer: asyncio.StreamWriter) -> str:
    address = writer.get_extra_info("peername")
    return f"{address[0]}:{address[1]}" if isinstance(address, tuple) and len(address) >= 2 else ""


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise _Refused(error(400, 400, "malformed request line"))
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise _Refused(error(400, 400, f"malformed header line {line[:80]!r}"))
            headers[name.strip().lower()] = value.strip()
    headers[_VERSION] = parts[2]
    return parts[0], parts[1], headers


def _closes(request: Request) -> bool:
    """HTTP/1.1 keeps the connection unless told to close it; HTTP/1.0 closes it unless told to keep it."""
    connection = request.headers.get("connection", "").lower()
    if request.headers.get(_VERSION) == "HTTP/1.0":
        return connection != "keep-alive"
    return connection == "close"


def _check_length(headers: dict[str, str]) -> int:
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise _Refused(error(411, 411, "send the body with Content-Length, not chunked"))
    length_text = headers.get("content-length", "0")
    if not length_text.isdigit():
        raise _Refused(error(400, 400, f"bad Content-Length {length_text[:20]!r}"))
    length = int(length_text)
    if length > MAX_BODY_BYTES:
        raise _Refused(error(413, 413, f"request body over {MAX_BODY_BYTES} bytes"))
    return length


async def _read_body(reader: asyncio.StreamReader, headers: dict[str, str]) -> bytes:
    length = _check_length(headers)
    try:
        async with asyncio.timeout(REQUEST_TIMEOUT_S):
            return await reader.readexactly(length) if length else b""
    except TimeoutError:
        raise _Refused(error(408, 408, f"no complete body within {REQUEST_TIMEOUT_S:g}s")) from None


async def _discard_unread(reader: asyncio.StreamReader) -> None:
    """Closing with unread bytes would reset the connection, and a reset can destroy the answer before the
    client reads it: what the client still sends is read and dropped, for a bounded time and size."""
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(1.0):
            for _ in range(64):
                if not await reader.read(MAX_HEAD_BYTES):
                    break


async def _write(writer: asyncio.StreamWriter, response: Response, close: bool) -> None:
    payload = response.raw if response.raw is not None else json.dumps(response.body).encode()
    extra = "".join(f"{name}: {value}\r\n" for name, value in response.headers.items())
    connection = "close" if close else "keep-alive"
    writer.write(f"HTTP/1.1 {response.status} {_REASONS.get(response.status, 'Error')}\r\n"
                 f"Content-Type: {CONTENT_TYPE}\r\nContent-Length: {len(payload)}\r\n{extra}"
                 f"Connection: {connection}\r\n\r\n".encode() + payload)
    await writer.drain()
    if close and writer.can_write_eof():
        with contextlib.suppress(OSError):
            writer.write_eof()
