"""What the fault hook costs dispatch: µs per request through `broker.dispatch.dispatch`, in-process.

    python bench/fault_hook.py [--baseline OLD_DISPATCH_PY] [--calls N]

Rows: no rules (the fast path every broker takes unless a test adds faults); one rule for another API
(the table is walked but nothing matches); and, with --baseline (e.g. `git show HEAD~1:broker/wire/dispatch.py
> /tmp/old.py`), the same requests through that older dispatch, so the hook's cost is the difference.
The requests are cheap ones (ApiVersions, Metadata for one topic) so the hook is as large a share of the
total as it can be. Best of 7 rounds; printed, never asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import sys
import tempfile
import time
import timeit
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from minikafka.broker.config.config import build_config
from minikafka.broker.security.session import plaintext_session
from minikafka.broker.server import BrokerServer
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.dispatch import dispatch
from minikafka.protocol.codec import encode_request

ROUNDS = 7
TOPIC = "bench-fault-hook"

Dispatch = Callable[[bytes, Callable[[int, int, int, str | None], RequestContext]], Awaitable[bytes | None]]


def _frames() -> list[tuple[str, bytes]]:
    api_versions = ApiVersionsRequest(client_software_name="bench", client_software_version="1")
    metadata = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TOPIC),),
                               allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    # encode_request gives the size-prefixed frame; dispatch takes the frame without its 4-byte length.
    return [("ApiVersions v3", encode_request(1, api_versions, "bench")[4:]),
            ("Metadata v12, 1 topic", encode_request(2, metadata, "bench")[4:])]


def _load_baseline(path: Path) -> Dispatch:
    spec = importlib.util.spec_from_file_location("minikafka.broker._dispatch_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dispatch  # type: ignore[no-any-return]


async def _per_call_s(run: Dispatch, frame: bytes, make_context: Any, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        await run(frame, make_context)
    return (time.perf_counter() - start) / calls


async def _best_us(variants: list[Dispatch], frame: bytes, make_context: Any, calls: int) -> list[float]:
    """Best of ROUNDS for each variant, the variants interleaved round by round so that load from other
    processes on a shared machine falls on all of them alike."""
    best = [float("inf")] * len(variants)
    for _ in range(ROUNDS):
        for i, run in enumerate(variants):
            best[i] = min(best[i], await _per_call_s(run, frame, make_context, calls))
    return [seconds * 1e6 for seconds in best]


def _hook_alone_ns(services: Any, request: Any) -> float:
    """The hook's own expression on an empty table, as dispatch evaluates it."""
    def hook() -> object:
        faults = services.faults
        return faults.take(0, "bench", request) if faults.rules else None

    calls = 1_000_000
    return min(timeit.repeat(hook, number=calls, repeat=ROUNDS)) / calls * 1e9


async def _measure(baseline: Dispatch | None, calls: int) -> list[tuple[str, str, float]]:
    with tempfile.TemporaryDirectory(prefix="minikafka-bench-") as data_dir:
        server = BrokerServer(build_config(overrides=[], host="127.0.0.1", port=0, data_dir=Path(data_dir)))
        await server.start()
        try:
            services = server.services
            assert services is not None and server.node is not None
            services.logs.create_topic(TOPIC, 1)
            node = server.node

            def make_context(api_key: int, api_version: int, correlation_id: int,
                             client_id: str | None) -> RequestContext:
                return RequestContext(api_key, api_version, correlation_id, client_id, 1, "bench", node, services,
                                      plaintext_session("127.0.0.1"))

            rows = []
            for name, frame in _frames():
                variants: list[tuple[str, Dispatch]] = [("no rules", dispatch)]
                if baseline is not None:
                    variants.insert(0, ("baseline dispatch (no hook)", baseline))
                timings = await _best_us([run for _, run in variants], frame, make_context, calls)
                rows += [(name, label, micros) for (label, _), micros in zip(variants, timings, strict=True)]
                rule = services.faults.add({"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER", "count": None})
                [one_rule] = await _best_us([dispatch], frame, make_context, calls)
                rows.append((name, "1 rule, other API", one_rule))
                services.faults.remove(rule.id)
            rows.append(("(hook expression alone)", "no rules", _hook_alone_ns(services, None) / 1000))
            return rows
        finally:
            await server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="an older broker/wire/dispatch.py to compare with")
    parser.add_argument("--calls", type=int, default=20000)
    args = parser.parse_args()
    baseline = _load_baseline(args.baseline) if args.baseline else None
    rows = asyncio.run(_measure(baseline, args.calls))
    print(f"{'request':<24}{'dispatch':<32}{'us/request':>10}")
    for request, variant, micros in rows:
        print(f"{request:<24}{variant:<32}{micros:>10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
