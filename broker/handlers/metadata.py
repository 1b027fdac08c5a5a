"""Metadata: v0-13.

Behavior:
- Brokers: the online nodes, at their addresses on the listener the request came in on; controller:
  the lowest online node id.
- Topics: all (null list, or an empty list at v0) or the ones named (by name, or by topic id at
  v10+). An unknown topic is created when the request allows it and auto.create.topics.enable is
  on (Kafka's default), else UNKNOWN_TOPIC_OR_PARTITION; an illegal name is INVALID_TOPIC_EXCEPTION.
  A request whose unknown topics would need more than max.partitions.per.request partitions creates
  none of them and answers each with POLICY_VIOLATION (Kafka's controller refuses that batch).
- Each distinct topic (name, or id) is answered once however often it is named, as Kafka's toSet does.
- v10-11 requests carry a nullable name and a topic id but cannot look up by id: a null name or a
  non-zero id there fails the request with INVALID_REQUEST on every topic (Kafka's KafkaApis check),
  a null name echoed as "" since the response cannot carry a null name before v12.
- Partitions: leader, leader epoch, replicas, ISR (the online replicas; data is stored once) and
  offline replicas from the cluster view (broker/wire/cluster.py); a partition whose replicas are all down
  has leader -1 and LEADER_NOT_AVAILABLE.
- Authorized operations (v8+, when asked): every operation of the topic (and, v8-10, of the cluster),
  as a Kafka broker without an authorizer answers; unasked they keep the default -2^31.
- v13 adds a top-level error code (KIP-1102, REBOOTSTRAP_REQUIRED for clients whose bootstrap
  brokers are all gone): this broker is always its own bootstrap, so it is always NONE.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from minikafka.broker.handlers._shared.authorization import CLUSTER_OPERATIONS, TOPIC_OPERATIONS, operations_if
from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.topics import topic_entry
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_code_for
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import ZERO_UUID, build, nested
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.manager import TopicMeta

API_KEY = ApiKey.METADATA
VERSIONS = VersionRange(0, 13)
# A topic's entry in the answer: a found topic's from the cluster view's derived values, else a dict to build.
EntryOf = Callable[[TopicMeta], Any]


def _lookup(ctx: RequestContext, name: str | None, topic_id: uuid.UUID | None, allow_create: bool,
            entry_of: EntryOf) -> Any:
    logs = ctx.services.logs
    if name is None:
        meta = logs.topic_by_id(topic_id) if topic_id not in (None, ZERO_UUID) else None
        if meta is None:
            return {"error_code": ErrorCode.unknown_topic_id, "name": None, "topic_id": topic_id or ZERO_UUID}
        return entry_of(meta)
    meta = logs.topic(name)
    if meta is None and allow_create:
        try:
            meta = ctx.services.auto_create_topic(name)
        except Exception as exc:
            return {"error_code": error_code_for(exc, ctx, topic=name), "name": name, "topic_id": ZERO_UUID}
        if meta is not None:
            ctx.log.info("auto-created topic", topic=name, partitions=meta.partitions)
    if meta is None:
        return {"error_code": ErrorCode.unknown_topic_or_partition, "name": name, "topic_id": ZERO_UUID}
    return entry_of(meta)


def _auto_creation_too_large(ctx: RequestContext, requested: Any) -> bool:
    """Would this request auto-create more partitions than one CreateTopics request may?"""
    services = ctx.services
    if not services.config.auto_create_topics:
        return False
    missing = {t.name for t in requested if t.name is not None and services.logs.topic(t.name) is None}
    return len(missing) * services.config.num_partitions > services.config.max_partitions_per_request


def _too_large_or_lookup(ctx: RequestContext, topic: Any, entry_of: EntryOf) -> Any:
    """Known topics answered as usual; none created, the missing ones refused as one too-large batch."""
    if topic.name is not None and ctx.services.logs.topic(topic.name) is None:
        return {"error_code": ErrorCode.policy_violation, "name": topic.name, "topic_id": ZERO_UUID}
    return _lookup(ctx, topic.name, getattr(topic, "topic_id", None), False, entry_of)


def _distinct(requested: Any) -> list[Any]:
    """One entry per distinct (name, topic id), first occurrence first: Kafka answers `topics.toSet`,
    so a request naming a topic a million times gets one entry, not a million."""
    distinct: dict[tuple[str | None, uuid.UUID | None], Any] = {}
    for topic in requested:
        distinct.setdefault((topic.name, getattr(topic, "topic_id", None)), topic)
    return list(distinct.values())


def _by_id_before_v12(requested: Any, version: int) -> bool:
    """v10 and v11 have a nullable name and a topic id in the request but cannot look topics up by id."""
    return version < 12 and any(
        topic.name is None or getattr(topic, "topic_id", ZERO_UUID) not in (None, ZERO_UUID) for topic in requested)


def _invalid_request(request: Any, requested: list[Any]) -> Any:
    """Kafka's MetadataRequest.getErrorResponse: every requested topic marked INVALID_REQUEST, a null
    name sent back as "" because the response's name is not nullable before v12."""
    topics = [{"error_code": ErrorCode.invalid_request, "name": topic.name or "",
               "topic_id": getattr(topic, "topic_id", None) or ZERO_UUID, "is_internal": False, "partitions": ()}
              for topic in requested]
    return build(response_of(request), throttle_time=0, topics=topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    services = ctx.services
    requested = request.topics
    if requested is not None:
        requested = _distinct(requested)
        if _by_id_before_v12(requested, request.__version__):
            ctx.log.info("request failed", error="INVALID_REQUEST",
                         reason=f"topic ids or null topic names in a v{request.__version__} Metadata request")
            return _invalid_request(request, requested)
    response_cls = response_of(request)
    topic_cls = nested(response_cls, "topics")
    operations = TOPIC_OPERATIONS if getattr(request, "include_topic_authorized_operations", False) else None

    def entry_of(meta: TopicMeta) -> Any:
        return topic_entry(ctx, meta, topic_cls, range(meta.partitions), operations)

    if requested is None or (request.__version__ == 0 and not requested):
        topics = [entry_of(meta) for meta in services.logs.topics()]
    else:
        allow_create = getattr(request, "allow_auto_topic_creation", True)
        if allow_create and _auto_creation_too_large(ctx, requested):
            topics = [_too_large_or_lookup(ctx, topic, entry_of) for topic in requested]
        else:
            topics = [_lookup(ctx, topic.name, getattr(topic, "topic_id", None), allow_create, entry_of)
                      for topic in requested]
    if operations is not None:
        for topic in topics:
            if type(topic) is dict:  # a topic not found; the entries of those found carry them already
                topic["topic_authorized_operations"] = operations
    cluster = services.cluster
    return build(
        response_cls,
        throttle_time=0,
        error_code=ErrorCode.none,
        brokers=[{"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack}
                 for n in cluster.nodes_on(ctx.session.listener_name)],
        cluster_id=cluster.cluster_id,
        controller_id=cluster.controller_id,
        topics=topics,
        cluster_authorized_operations=operations_if(
            getattr(request, "include_cluster_authorized_operations", False), CLUSTER_OPERATIONS),
    )
