"""ApiVersions: v0-4.

Behavior:
- Lists exactly the APIs registered in this node's registry, with their advertised ranges.
- A version newer than 4 never reaches here: the dispatcher answers it at v0 with UNSUPPORTED_VERSION.
- v3+: supported and finalized features (`metadata.version`, `transaction.version`, `group.version`,
  `kraft.version`) from broker/wire/features.py: the profile's release and what this broker implements.
  v3 leaves out supported features whose minimum is 0, as Kafka does (KAFKA-17011); v4 lists them.
- Default-valued tagged fields are not written (kio skips them): with nothing finalized, as in the
  2.8-3.2 profiles, the v3+ body ends with an empty tag buffer, which Debian's kcat (librdkafka 2.0.2)
  needs.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.features import (
    CONSUMER_GROUP_HEARTBEAT_KEY,
    SHARE_GROUP_HEARTBEAT_KEY,
    features,
    supported_for,
)
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.encoder import remember_encoding

if TYPE_CHECKING:
    from minikafka.broker.wire.registry import Registry

API_KEY = ApiKey.API_VERSIONS
VERSIONS = VersionRange(0, 4)


async def handle(ctx: RequestContext, request: Any) -> Any:
    return _response(ctx.services.registry, response_of(request), ctx.services.config.transaction_version)


@lru_cache(maxsize=64)
def _response(registry: Registry, response_cls: Any, transaction_version: int) -> Any:
    """The whole answer for one version: it depends only on the node's registry and static config, and
    building and encoding its ~70 entries per request cost ~230 µs (clients send one per connection)."""
    found = features(registry.kafka_version, transaction_version,
                     registry.route(CONSUMER_GROUP_HEARTBEAT_KEY) is not None,
                     serves_share_groups=registry.route(SHARE_GROUP_HEARTBEAT_KEY) is not None)
    return remember_encoding(build(
        response_cls,
        api_keys=[
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, lo, hi in registry.api_versions()
        ],
        throttle_time=0,
        supported_features=[{"name": name, "min_version": low, "max_version": high}
                            for name, (low, high) in supported_for(response_cls.__version__, found).items()],
        finalized_features_epoch=found.epoch,
        finalized_features=[{"name": name, "min_version_level": level, "max_version_level": level}
                            for name, level in found.finalized.items()],
    ))
