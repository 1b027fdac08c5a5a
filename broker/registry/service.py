"""The schema registry as a broker service: replays `_schemas`, serves the REST API, counts its requests,
and can be reset by the control plane between tests."""

from __future__ import annotations

import ssl
import time
from collections import Counter, deque
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.broker.registry.api import RegistryApi
from minikafka.broker.registry.http import Authenticator, HttpServer, Request, Response
from minikafka.broker.wire.hooks import HttpExchange
from minikafka.coordinator.schemas.registry import SchemaRegistry

if TYPE_CHECKING:
    from minikafka.broker.wire.services import BrokerServices

_log = structlog.get_logger("minikafka.schema_registry")

RECENT_EXCHANGES = 200


_PLACEHOLDERS = {"subjects": "{s}", "ids": "{id}", "versions": "{v}", "config": "{s}", "mode": "{s}"}
_ROUTES = frozenset({"", "schemas", "subjects", "config", "mode", "compatibility", "contexts"})


def _route_name(request: Request) -> str:
    """A request's route without its subject, version or id, for counting: "POST /subjects/{s}/versions"
    (any unknown path is "other", so the counts stay bounded)."""
    parts = request.path.strip("/").split("/")
    if parts[0] not in _ROUTES:
        return f"{request.method} other"
    shape = list(parts)
    for index in range(1, len(parts)):
        placeholder = _PLACEHOLDERS.get(parts[index - 1])
        if placeholder is not None and shape[index - 1] == parts[index - 1]:
            shape[index] = placeholder
    return f"{request.method} /{'/'.join(shape)}"


class SchemaRegistryService:
    def __init__(self, services: BrokerServices, host: str, port: int, tls: ssl.SSLContext | None = None,
                 authenticate: Authenticator | None = None) -> None:
        """`tls`: serve HTTPS; `authenticate`: require HTTP basic auth (both from a broker listener's
        security, `schema.registry.listener.name`)."""
        self.registry = SchemaRegistry(services.logs, services.clock.now_ms)
        self._api = RegistryApi(self.registry)
        self._server = HttpServer(self._handle, host, port, tls, authenticate)
        # (route, HTTP status) -> requests answered, for /metrics and the inspector.
        self.requests: Counter[tuple[str, int]] = Counter()
        # The newest exchanges, oldest first, for the inspector and GET /schema-registry on the admin API.
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_EXCHANGES)
        self._now_ms = services.clock.now_ms
        self._services = services  # its recorder can be turned on after the registry starts (a reset)

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def url(self) -> str:
        host = self._server.host
        shown = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
        return f"{self._server.scheme}://{shown}:{self._server.port}"

    async def start(self) -> int:
        started = time.monotonic()
        self.registry.load()
        port = await self._server.start()
        _log.info("schema registry ready", url=self.url, subjects=len(self.registry.subjects()),
                  load_ms=round((time.monotonic() - started) * 1000, 1))
        return port

    def abort(self) -> None:
        self._server.abort()

    async def close(self) -> None:
        await self._server.close()

    def reset(self) -> None:
        """Forget every subject, config and mode (the control plane's reset between tests)."""
        self.registry.reset()

    async def _handle(self, request: Request) -> Response:
        started = time.perf_counter_ns()
        response = await self._api.handle(request)
        route = _route_name(request)
        self.requests[(route, response.status)] += 1
        error_code = response.body.get("error_code") if isinstance(response.body, dict) else None
        exchange = HttpExchange("SchemaRegistry", self._now_ms(), request.peer, request.method, request.path[:200],
                                route, response.status, error_code, time.perf_counter_ns() - started)
        self.recent.append({"time_ms": exchange.time_ms, "method": exchange.method, "path": exchange.path,
                            "route": route, "status": response.status, "error_code": error_code,
                            "latency_ms": round(exchange.latency_ns / 1e6, 3)})
        recorder = self._services.recorder
        if recorder is not None:
            recorder.observe_http(exchange)
        return response

    def snapshot(self) -> dict[str, Any]:
        """Subjects with their versions and levels, the global level and mode, request counts per route and
        status, and the newest exchanges."""
        return {"url": self.url, **self.registry.summary(),
                "requests": [{"route": route, "status": status, "count": count}
                             for (route, status), count in sorted(self.requests.items())],
                "recent": list(self.recent)}
