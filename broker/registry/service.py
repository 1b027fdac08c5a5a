"""The schema registry as a broker service: replays `_schemas`, serves the REST API, counts its requests,
and can be reset by the control plane between tests."""

from __future__ import annotations

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.broker.registry.api import RegistryApi
from minikafka.broker.registry.http import HttpServer, Request, Response
from minikafka.coordinator.schemas.registry import SchemaRegistry

if TYPE_CHECKING:
    from minikafka.broker.wire.services import BrokerServices

_log = structlog.get_logger("minikafka.schema_registry")


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
    def __init__(self, services: BrokerServices, host: str, port: int) -> None:
        self.registry = SchemaRegistry(services.logs, services.clock.now_ms)
        self._api = RegistryApi(self.registry)
        self._server = HttpServer(self._handle, host, port)
        # (route, HTTP status) -> requests answered, for /metrics and the inspector.
        self.requests: Counter[tuple[str, int]] = Counter()
        self.started_ms = 0

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
        response = await self._api.handle(request)
        self.requests[(_route_name(request), response.status)] += 1
        return response

    def snapshot(self) -> dict[str, Any]:
        return {"url": self.url, **self.registry.summary(),
                "requests": [{"route": route, "status": status, "count": count}
                             for (route, status), count in sorted(self.requests.items())]}
