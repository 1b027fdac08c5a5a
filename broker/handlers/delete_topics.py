"""DeleteTopics: v1-6.

Behavior (Kafka 4's ControllerApis.deleteTopics):
- Topics named by name, or at v6+ by name or topic id (KIP-516). Each entry is checked first:
  neither a name nor an id, or both, is INVALID_REQUEST on that entry only ("Neither topic name nor
  id were specified." / "You may not specify both topic name and topic id."); a name or an id
  given twice is INVALID_REQUEST once ("Duplicate topic name." / "Duplicate topic id."), and a name
  whose topic's id is also given is INVALID_REQUEST on the name ("The provided topic name maps to an
  ID that was already supplied."). The valid entries are then deleted, ids first.
- An unknown name is UNKNOWN_TOPIC_OR_PARTITION, an unknown id (including the old id of a topic
  since re-created under its name) UNKNOWN_TOPIC_ID with a null name.
  delete.topic.enable=false gives TOPIC_DELETION_DISABLED.
- A deleted topic's id is gone for good: re-creating the name makes a new id (storage/manager.py).
- Every group's committed offsets of the topic are deleted with it (tombstones in __consumer_offsets),
  as Kafka's group coordinator does on partition deletion.
- The topic's partitions count against the client's controller_mutation_rate: from v5 a topic past the
  quota is THROTTLING_QUOTA_EXCEEDED, below v5 it is deleted and the response throttled.
Simplifications: internal topics (__consumer_offsets, __transaction_state) are refused with
INVALID_TOPIC_EXCEPTION, because deleting them would lose coordinator state.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.wire.context import RequestContext
from minikafka.broker.wire.errors import error_fields
from minikafka.broker.wire.quotas import take_mutations
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import ZERO_UUID, build
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.errors import InvalidTopic, UnknownTopicOrPartition
from minikafka.storage.manager import TopicMeta

API_KEY = ApiKey.DELETE_TOPICS
VERSIONS = VersionRange(1, 6)


@dataclass(slots=True)
class _Targets:
    """The request's entries sorted out: valid names and ids, and the answers of the invalid ones."""

    names: dict[str, None] = field(default_factory=dict)  # insertion-ordered set
    ids: dict[uuid.UUID, None] = field(default_factory=dict)
    answers: list[dict[str, Any]] = field(default_factory=list)


def _invalid(name: str | None, topic_id: uuid.UUID, message: str) -> dict[str, Any]:
    return {"name": name, "topic_id": topic_id, "error_code": ErrorCode.invalid_request, "error_message": message}


def _sort_out(request: Any) -> _Targets:
    targets = _Targets()
    duplicate_names: dict[str, None] = {}
    duplicate_ids: dict[uuid.UUID, None] = {}

    def add(seen: dict[Any, None], duplicates: dict[Any, None], key: Any) -> None:
        if key in duplicates or key in seen:
            duplicates[key] = None
            seen.pop(key, None)
        else:
            seen[key] = None

    if hasattr(request, "topic_names"):
        entries = [(name, ZERO_UUID) for name in request.topic_names]
    else:
        entries = [(t.name, t.topic_id or ZERO_UUID) for t in request.topics]
    for name, topic_id in entries:
        if name is None and topic_id == ZERO_UUID:
            targets.answers.append(_invalid(None, ZERO_UUID, "Neither topic name nor id were specified."))
        elif name is None:
            add(targets.ids, duplicate_ids, topic_id)
        elif topic_id == ZERO_UUID:
            add(targets.names, duplicate_names, name)
        else:
            targets.answers.append(_invalid(name, topic_id, "You may not specify both topic name and topic id."))
    targets.answers += [_invalid(name, ZERO_UUID, "Duplicate topic name.") for name in duplicate_names]
    targets.answers += [_invalid(None, topic_id, "Duplicate topic id.") for topic_id in duplicate_ids]
    return targets


def _delete(ctx: RequestContext, meta: TopicMeta) -> None:
    if not ctx.services.config.delete_topic_enable:
        # Kafka answers with the code alone (DeleteTopicsRequest.getErrorResponse).
        raise KafkaError(code=ErrorCode.topic_deletion_disabled)
    if meta.internal:
        raise InvalidTopic(f"internal topic {meta.name} cannot be deleted")
    take_mutations(ctx, meta.partitions)
    ctx.services.delete_topic(meta.name)
    ctx.log.info("deleted topic", topic=meta.name, topic_id=str(meta.topic_id))


def _answer(ctx: RequestContext, meta: TopicMeta | None, name: str | None, topic_id: uuid.UUID,
            missing: KafkaError) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": ErrorCode.none}
    try:
        if meta is None:
            raise missing
        entry.update(name=meta.name, topic_id=meta.topic_id)
        _delete(ctx, meta)
    except Exception as exc:
        entry.update(error_fields(ctx, exc, topic=name))
    return entry


async def handle(ctx: RequestContext, request: Any) -> Any:
    logs = ctx.services.logs
    targets = _sort_out(request)
    results = targets.answers
    by_id = {topic_id: logs.topic_by_id(topic_id) for topic_id in targets.ids}
    named_by_id = {meta.name for meta in by_id.values() if meta is not None}
    for name in [name for name in targets.names if name in named_by_id]:
        del targets.names[name]
        results.append(_invalid(name, logs.topic(name).topic_id,  # type: ignore[union-attr]
                                "The provided topic name maps to an ID that was already supplied."))
    for topic_id, meta in by_id.items():
        missing = KafkaError("This server does not host this topic ID.", code=ErrorCode.unknown_topic_id)
        results.append(_answer(ctx, meta, None, topic_id, missing))
    for name in targets.names:
        missing = UnknownTopicOrPartition("This server does not host this topic-partition.")
        results.append(_answer(ctx, logs.topic(name), name, ZERO_UUID, missing))
    return build(response_of(request), throttle_time=0, responses=results)
