"""ApiVersions: v0-4.

Behavior:
- Lists exactly the APIs registered in this node's registry, with their advertised ranges.
- A version newer than 4 never reaches here: the dispatcher answers it at v0 with UNSUPPORTED_VERSION.
- No features are finalized (transaction.version stays 0 until KIP-890 is implemented), and
  default-valued tagged fields are not written: Debian's kcat (librdkafka 2.0.2) mis-parses them.
"""

from __future__ import annotations

from typing import Any

from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build

from ..context import RequestContext
from .common import response_of

API_KEY = ApiKey.API_VERSIONS
VERSIONS = VersionRange(0, 4)


async def handle(ctx: RequestContext, request: Any) -> Any:
    return build(
        response_of(request),
        api_keys=[
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, lo, hi in ctx.services.registry.api_versions()
        ],
        throttle_time=0,
    )
