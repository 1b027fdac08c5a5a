"""What each API needs the authorizer to allow, checked at the dispatch point before the handler runs.

The checks are Kafka's KafkaApis ones, per API: a request-wide resource (a group, a transactional id,
the cluster) refused fails the whole request with GROUP_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED or CLUSTER_AUTHORIZATION_FAILED; topics refused get
TOPIC_AUTHORIZATION_FAILED on their own partitions while the rest of the request is handled (the
request is split and the answers merged with the fault injector's machinery, broker/control/faults.py);
listings (Metadata for all topics, ListGroups, ListTransactions) leave out what the principal may not
DESCRIBE. Handlers stay unaware of ACLs; with no authorizer configured nothing here runs.

DescribeGroups, DeleteGroups, DescribeTransactions and the config APIs answer each refused resource
with its own error and serve the rest. Simplifications, each failing closed: a batched FindCoordinator
(v4+) or OffsetFetch (v8+) naming several groups is refused whole when one is refused, and OffsetFetch
v8+ does not filter its topics; Metadata's auto-creation needs DESCRIBE on the topic but not CREATE.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

from minikafka.broker.security.acls import CLUSTER_NAME, Authorizer, Operation, ResourceType
from minikafka.protocol.api_keys import ApiKey
from minikafka.protocol.build import build, nested
from minikafka.protocol.codec import response_class
from minikafka.protocol.error_response import error_response
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.split import (
    group_ids_of,
    merge_responses,
    partition_errors,
    split_request,
    transactional_ids_of,
)

Handle = Callable[[Any, Any], Awaitable[Any]]
Check = Callable[[Any, Authorizer, Any, Handle], Awaitable[Any]]

_TOPIC_DENIED = ErrorCode.topic_authorization_failed
_GROUP_DENIED = ErrorCode.group_authorization_failed
_TXN_DENIED = ErrorCode.transactional_id_authorization_failed
_CLUSTER_DENIED = ErrorCode.cluster_authorization_failed


# The message Kafka 4 sends with a refusal, where it sends one: ControllerApis' "Authorization failed." for
# CreateTopics and ApiError's default text (Errors.message()) for DeleteTopics, DescribeProducers and the
# config changes; every other refusal carries the code alone.
_DENIAL_MESSAGES: dict[tuple[int, ErrorCode], str] = {
    (ApiKey.CREATE_TOPICS, _TOPIC_DENIED): "Authorization failed.",
    (ApiKey.DELETE_TOPICS, _TOPIC_DENIED): "Topic authorization failed.",
    (ApiKey.DESCRIBE_PRODUCERS, _TOPIC_DENIED): "Topic authorization failed.",
    **{(api, code): text for api in (ApiKey.ALTER_CONFIGS, ApiKey.INCREMENTAL_ALTER_CONFIGS)
       for code, text in ((_TOPIC_DENIED, "Topic authorization failed."),
                          (_CLUSTER_DENIED, "Cluster authorization failed."),
                          (_GROUP_DENIED, "Group authorization failed."))},
}


# FindCoordinator v0-3 refusals are sent as Kafka's prepareOldResponse, with the code's own text.
_OLD_FIND_COORDINATOR_MESSAGES = {
    _GROUP_DENIED: "Group authorization failed.",
    _TXN_DENIED: "Transactional Id authorization failed.",
}


def _denial_message(request: Any, code: ErrorCode) -> str | None:
    if request.__api_key__ == ApiKey.FIND_COORDINATOR and request.__version__ < 4:
        return _OLD_FIND_COORDINATOR_MESSAGES.get(code)
    return _DENIAL_MESSAGES.get((request.__api_key__, code))


def _denied(request: Any, code: ErrorCode) -> Any:
    return error_response(request, code, _denial_message(request, code))


def _cluster(operation: Operation) -> Check:
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        if not authorizer.authorize(ctx.session, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return _denied(request, _CLUSTER_DENIED)
        return await handle(ctx, request)
    return check


async def _describe_log_dirs(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    """Kafka answers a refused DescribeLogDirs with no log dirs, and CLUSTER_AUTHORIZATION_FAILED where the
    version has a top-level code (v3+)."""
    if not authorizer.authorize(ctx.session, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        return build(response_class(request.__api_key__, request.__version__), throttle_time=0,
                     error_code=_CLUSTER_DENIED, results=[])
    return await handle(ctx, request)


def _named(resource_type: ResourceType, operation: Operation, code: ErrorCode,
           names: Callable[[int, Any], tuple[str, ...]]) -> Check:
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        for name in names(ctx.api_key, request):
            if not authorizer.authorize(ctx.session, operation, resource_type, name):
                return _denied(request, code)
        return await handle(ctx, request)
    return check


def _groups(operation: Operation) -> Check:
    return _named(ResourceType.GROUP, operation, _GROUP_DENIED, group_ids_of)


def _transactional_id(operation: Operation) -> Check:
    return _named(ResourceType.TRANSACTIONAL_ID, operation, _TXN_DENIED, transactional_ids_of)


def _topics(operation: Operation, *, or_cluster: bool = False) -> Check:
    """Partitions of refused topics answered TOPIC_AUTHORIZATION_FAILED; the rest handled."""
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        session = ctx.session
        if or_cluster and authorizer.authorize(session, operation, ResourceType.CLUSTER, CLUSTER_NAME):
            return await handle(ctx, request)
        verdicts: dict[str, bool] = {}

        def refused(topic: str, _partition: int | None) -> bool:
            if topic not in verdicts:
                verdicts[topic] = authorizer.authorize(session, operation, ResourceType.TOPIC, topic)
            return not verdicts[topic]

        split = split_request(request, refused, ctx.services.faults.resolve_topic)
        if split is None:
            return await handle(ctx, request)
        ctx.log.info("topics not authorized", operation=operation.name, principal=str(session.principal),
                     topics=sorted(topic for topic, allowed in verdicts.items() if not allowed))
        injected = partition_errors(split, _TOPIC_DENIED, _denial_message(request, _TOPIC_DENIED))
        if injected is None:
            return _denied(request, _TOPIC_DENIED)
        if split.rest is None:
            return injected
        return merge_responses(await handle(ctx, split.rest), injected)
    return check


async def _subscribed_topics(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    """ConsumerGroupHeartbeat: one subscribed topic the member may not DESCRIBE fails the whole heartbeat
    (KafkaApis.handleConsumerGroupHeartbeat), so a member never learns partitions of a topic it cannot see.
    A heartbeat that leaves the subscription unchanged carries no names and is not checked."""
    names = request.subscribed_topic_names or ()
    refused = sorted({name for name in names
                      if not authorizer.authorize(ctx.session, Operation.DESCRIBE, ResourceType.TOPIC, name)})
    if not refused:
        return await handle(ctx, request)
    ctx.log.info("subscribed topics not authorized", principal=str(ctx.session.principal), topics=refused)
    return _denied(request, _TOPIC_DENIED)


def _names_in(field: str, operation: Operation) -> Check:
    """DeleteTopics v0-5: topics as a plain list of names."""
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        names = getattr(request, field, None)
        if names is None:
            return await _topics(operation)(ctx, authorizer, request, handle)
        refused = [name for name in names if not authorizer.authorize(ctx.session, operation, ResourceType.TOPIC,
                                                                       name)]
        if not refused:
            return await handle(ctx, request)
        injected = _denied(dataclasses.replace(request, **{field: tuple(refused)}), _TOPIC_DENIED)
        allowed = tuple(name for name in names if name not in refused)
        if not allowed:
            return injected
        return merge_responses(await handle(ctx, dataclasses.replace(request, **{field: allowed})), injected)
    return check


def _all(*checks: Check) -> Check:
    """The checks in turn; the first refusal answers."""
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        async def run(position: int, ctx_: Any, request_: Any) -> Any:
            if position == len(checks):
                return await handle(ctx_, request_)
            return await checks[position](ctx_, authorizer, request_, lambda c, r: run(position + 1, c, r))
        return await run(0, ctx, request)
    return check


async def _init_producer_id(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    session = ctx.session
    if request.transactional_id is not None:
        return await _transactional_id(Operation.WRITE)(ctx, authorizer, request, handle)
    # Kafka: IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (authorizeByResourceType).
    if not (authorizer.authorize(session, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER, CLUSTER_NAME)
            or authorizer.authorize_any(session, Operation.WRITE, ResourceType.TOPIC)):
        return _denied(request, _CLUSTER_DENIED)
    return await handle(ctx, request)


async def _add_partitions_to_txn(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    """Kafka adds nothing when a topic is refused: those partitions TOPIC_AUTHORIZATION_FAILED, the others
    OPERATION_NOT_ATTEMPTED."""
    if request.__version__ >= 4:
        return await _transactional_id(Operation.WRITE)(ctx, authorizer, request, handle)
    refused_topics = {topic.name for topic in request.v3_and_below_topics
                      if not authorizer.authorize(ctx.session, Operation.WRITE, ResourceType.TOPIC, topic.name)}
    if not refused_topics:
        return await handle(ctx, request)
    response = _denied(request, ErrorCode.operation_not_attempted)
    results = []
    for topic in response.results_by_topic_v3_and_below:
        if topic.name in refused_topics:
            topic = dataclasses.replace(topic, results_by_partition=tuple(
                dataclasses.replace(p, partition_error_code=_TOPIC_DENIED) for p in topic.results_by_partition))
        results.append(topic)
    return dataclasses.replace(response, results_by_topic_v3_and_below=tuple(results))


def _listing(field: str, key: str, resource_type: ResourceType, *, cluster_sees_all: bool = False) -> Check:
    """A listing without the entries the principal may not DESCRIBE."""
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        response = await handle(ctx, request)
        session = ctx.session
        if cluster_sees_all and authorizer.authorize(session, Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
            return response
        kept = tuple(entry for entry in getattr(response, field)
                     if authorizer.authorize(session, Operation.DESCRIBE, resource_type, getattr(entry, key)))
        return dataclasses.replace(response, **{field: kept})
    return check


async def _metadata(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    session = ctx.session

    def visible(name: str | None) -> bool:
        return name is not None and authorizer.authorize(session, Operation.DESCRIBE, ResourceType.TOPIC, name)

    every_topic = request.topics is None or (request.__version__ == 0 and not request.topics)
    refused = () if every_topic else tuple(t for t in request.topics if t.name is not None and not visible(t.name))
    if refused:
        allowed = tuple(t for t in request.topics if t not in refused)
        response = await handle(ctx, dataclasses.replace(request, topics=allowed))
        # Built here, not by error_response: from v13 Metadata has a top-level error code, which would take it all.
        topic_cls = nested(type(response), "topics")
        injected: tuple[Any, ...] = tuple(build(topic_cls, name=topic.name, error_code=_TOPIC_DENIED)
                                          for topic in refused)
        response = dataclasses.replace(response, topics=response.topics + injected)
    else:
        response = await handle(ctx, request)
    if every_topic:
        response = dataclasses.replace(response, topics=tuple(t for t in response.topics if visible(t.name)))
    if getattr(request, "include_topic_authorized_operations", False):
        response = dataclasses.replace(response, topics=tuple(
            dataclasses.replace(t, topic_authorized_operations=authorizer.authorized_operations(
                session, ResourceType.TOPIC, t.name)) if t.error_code == ErrorCode.none else t
            for t in response.topics))
    return response


async def _describe_topic_partitions(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    response = await handle(ctx, request)
    named = {topic.name for topic in request.topics}
    topics = []
    for topic in response.topics:
        if authorizer.authorize(ctx.session, Operation.DESCRIBE, ResourceType.TOPIC, topic.name):
            topics.append(topic)
        elif topic.name in named:
            topics.append(dataclasses.replace(topic, error_code=_TOPIC_DENIED, partitions=()))
    return dataclasses.replace(response, topics=tuple(topics))


def _per_entry(request_field: str, response_field: str, operation: Operation,
               resource_of: Callable[[Any], tuple[ResourceType, str, ErrorCode] | None]) -> Check:
    """Requests naming several resources (DescribeGroups' groups, the config APIs' resources): each refused
    one is answered with its own error, the others handled, in one response."""
    async def check(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
        entries = getattr(request, request_field)
        refused: dict[ErrorCode, list[Any]] = {}
        allowed = []
        for entry in entries:
            resource = resource_of(entry)
            if resource is None or authorizer.authorize(ctx.session, operation, resource[0], resource[1]):
                allowed.append(entry)
            else:
                refused.setdefault(resource[2], []).append(entry)
        if not refused:
            return await handle(ctx, request)
        answered: tuple[Any, ...] = ()
        response: Any = None
        if allowed:
            response = await handle(ctx, dataclasses.replace(request, **{request_field: tuple(allowed)}))
            answered = getattr(response, response_field)
        for code, denied in refused.items():
            injected = _denied(dataclasses.replace(request, **{request_field: tuple(denied)}), code)
            response = response if response is not None else injected
            answered += getattr(injected, response_field)
        return dataclasses.replace(response, **{response_field: answered})
    return check


def _named_entries(resource_type: ResourceType, code: ErrorCode) -> Callable[[Any], tuple[ResourceType, str,
                                                                                           ErrorCode]]:
    return lambda name: (resource_type, name, code)


async def _describe_client_quotas(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    """Kafka's getErrorResponse: the code with its own text, and no entries (null)."""
    if not authorizer.authorize(ctx.session, Operation.DESCRIBE_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return build(response_class(request.__api_key__, request.__version__), throttle_time=0,
                     error_code=_CLUSTER_DENIED, error_message="Cluster authorization failed.", entries=None)
    return await handle(ctx, request)


async def _alter_client_quotas(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    """Kafka's getErrorResponse: every entry's entity answered with the refusal."""
    if not authorizer.authorize(ctx.session, Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return build(response_class(request.__api_key__, request.__version__), throttle_time=0, entries=[
            {"error_code": _CLUSTER_DENIED, "error_message": "Cluster authorization failed.",
             "entity": [{"entity_type": e.entity_type, "entity_name": e.entity_name} for e in entry.entity]}
            for entry in request.entries])
    return await handle(ctx, request)


def _config_resource(resource: Any) -> tuple[ResourceType, str, ErrorCode] | None:
    """Config resource types: 2 TOPIC, 4 BROKER, 8 BROKER_LOGGER and 16 CLIENT_METRICS (the cluster), 32 GROUP."""
    if resource.resource_type == 2:
        return ResourceType.TOPIC, resource.resource_name, _TOPIC_DENIED
    if resource.resource_type in (4, 8, 16):
        return ResourceType.CLUSTER, CLUSTER_NAME, _CLUSTER_DENIED
    if resource.resource_type == 32:
        return ResourceType.GROUP, resource.resource_name, _GROUP_DENIED
    return None


CHECKS: dict[int, Check] = {
    ApiKey.PRODUCE: _all(_transactional_id(Operation.WRITE), _topics(Operation.WRITE)),
    ApiKey.FETCH: _topics(Operation.READ),
    ApiKey.LIST_OFFSETS: _topics(Operation.DESCRIBE),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: _topics(Operation.DESCRIBE),
    ApiKey.METADATA: _metadata,
    ApiKey.DESCRIBE_TOPIC_PARTITIONS: _describe_topic_partitions,
    ApiKey.CREATE_TOPICS: _topics(Operation.CREATE, or_cluster=True),
    ApiKey.DELETE_TOPICS: _names_in("topic_names", Operation.DELETE),
    ApiKey.DELETE_RECORDS: _topics(Operation.DELETE),
    ApiKey.CREATE_PARTITIONS: _topics(Operation.ALTER),
    ApiKey.DESCRIBE_PRODUCERS: _topics(Operation.READ),
    ApiKey.FIND_COORDINATOR: _all(_groups(Operation.DESCRIBE), _transactional_id(Operation.DESCRIBE)),
    ApiKey.JOIN_GROUP: _groups(Operation.READ),
    ApiKey.SYNC_GROUP: _groups(Operation.READ),
    ApiKey.HEARTBEAT: _groups(Operation.READ),
    ApiKey.LEAVE_GROUP: _groups(Operation.READ),
    ApiKey.CONSUMER_GROUP_HEARTBEAT: _all(_groups(Operation.READ), _subscribed_topics),
    ApiKey.OFFSET_COMMIT: _all(_groups(Operation.READ), _topics(Operation.READ)),
    ApiKey.OFFSET_FETCH: _all(_groups(Operation.DESCRIBE), _topics(Operation.DESCRIBE)),
    ApiKey.OFFSET_DELETE: _all(_groups(Operation.DELETE), _topics(Operation.READ)),
    ApiKey.DESCRIBE_GROUPS: _per_entry("groups", "groups", Operation.DESCRIBE,
                                       _named_entries(ResourceType.GROUP, _GROUP_DENIED)),
    ApiKey.CONSUMER_GROUP_DESCRIBE: _groups(Operation.DESCRIBE),
    # Share groups (KIP-932): the group only; Kafka also checks the topics (READ, DESCRIBE).
    ApiKey.SHARE_GROUP_HEARTBEAT: _groups(Operation.READ),
    ApiKey.SHARE_GROUP_DESCRIBE: _groups(Operation.DESCRIBE),
    ApiKey.SHARE_FETCH: _groups(Operation.READ),
    ApiKey.SHARE_ACKNOWLEDGE: _groups(Operation.READ),
    ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: _groups(Operation.DESCRIBE),
    ApiKey.ALTER_SHARE_GROUP_OFFSETS: _groups(Operation.READ),
    ApiKey.DELETE_SHARE_GROUP_OFFSETS: _groups(Operation.DELETE),
    ApiKey.DELETE_GROUPS: _per_entry("groups_names", "results", Operation.DELETE,
                                     _named_entries(ResourceType.GROUP, _GROUP_DENIED)),
    ApiKey.LIST_GROUPS: _listing("groups", "group_id", ResourceType.GROUP, cluster_sees_all=True),
    ApiKey.INIT_PRODUCER_ID: _init_producer_id,
    ApiKey.ADD_PARTITIONS_TO_TXN: _all(_transactional_id(Operation.WRITE), _add_partitions_to_txn),
    ApiKey.ADD_OFFSETS_TO_TXN: _all(_transactional_id(Operation.WRITE), _groups(Operation.READ)),
    ApiKey.END_TXN: _transactional_id(Operation.WRITE),
    ApiKey.TXN_OFFSET_COMMIT: _all(_transactional_id(Operation.WRITE), _groups(Operation.READ),
                                   _topics(Operation.READ)),
    ApiKey.DESCRIBE_TRANSACTIONS: _per_entry("transactional_ids", "transaction_states", Operation.DESCRIBE,
                                             _named_entries(ResourceType.TRANSACTIONAL_ID, _TXN_DENIED)),
    ApiKey.LIST_TRANSACTIONS: _listing("transaction_states", "transactional_id", ResourceType.TRANSACTIONAL_ID),
    ApiKey.WRITE_TXN_MARKERS: _cluster(Operation.CLUSTER_ACTION),
    ApiKey.DESCRIBE_CONFIGS: _per_entry("resources", "results", Operation.DESCRIBE_CONFIGS, _config_resource),
    ApiKey.ALTER_CONFIGS: _per_entry("resources", "responses", Operation.ALTER_CONFIGS, _config_resource),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: _per_entry("resources", "responses", Operation.ALTER_CONFIGS,
                                                 _config_resource),
    ApiKey.LIST_CONFIG_RESOURCES: _cluster(Operation.DESCRIBE_CONFIGS),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: _describe_client_quotas,
    ApiKey.ALTER_CLIENT_QUOTAS: _alter_client_quotas,
    ApiKey.CREATE_ACLS: _cluster(Operation.ALTER),
    ApiKey.DELETE_ACLS: _cluster(Operation.ALTER),
    ApiKey.DESCRIBE_ACLS: _cluster(Operation.DESCRIBE),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: _cluster(Operation.DESCRIBE),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: _cluster(Operation.ALTER),
    ApiKey.DESCRIBE_LOG_DIRS: _describe_log_dirs,
    ApiKey.ELECT_LEADERS: _cluster(Operation.ALTER),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: _cluster(Operation.ALTER),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: _cluster(Operation.DESCRIBE),
}


async def handle_authorized(ctx: Any, authorizer: Authorizer, request: Any, handle: Handle) -> Any:
    check = CHECKS.get(ctx.api_key)
    if check is None:
        return await handle(ctx, request)
    return await check(ctx, authorizer, request, handle)
