"""Handler registry: each handler module declares API_KEY and VERSIONS; ApiVersions is built from it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from minikafka.protocol.api_keys import VersionRange, api_name, kio_range

Handler = Callable[[Any, Any], Awaitable[Any]]


class DuplicateHandler(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Route:
    api_key: int
    versions: VersionRange  # what we accept and decode
    advertised: VersionRange  # what ApiVersions says (may be wider, see Produce)
    handle: Handler
    name: str


class Registry:
    def __init__(self, modules: Iterable[ModuleType] = ()) -> None:
        self._routes: dict[int, Route] = {}
        for module in modules:
            self.register(module)

    def register(self, module: ModuleType) -> None:
        key = int(module.API_KEY)
        if key in self._routes:
            raise DuplicateHandler(f"two handlers for {api_name(key)}: {self._routes[key].name}, {module.__name__}")
        versions: VersionRange = module.VERSIONS
        parseable = kio_range(key)
        if versions.min < parseable.min or versions.max > parseable.max:
            raise ValueError(f"{module.__name__} declares {versions} but kio parses {parseable}")
        advertised = getattr(module, "ADVERTISED_VERSIONS", versions)
        self._routes[key] = Route(key, versions, advertised, module.handle, module.__name__)

    def route(self, api_key: int) -> Route | None:
        return self._routes.get(api_key)

    def api_versions(self) -> list[tuple[int, int, int]]:
        return sorted((r.api_key, r.advertised.min, r.advertised.max) for r in self._routes.values())
