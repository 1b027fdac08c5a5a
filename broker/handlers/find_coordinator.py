"""FindCoordinator: v0-6.

Behavior:
- key_type 0 (GROUP) answers the node leading `__consumer_offsets-partition_for(key, N)`; the topic is
  created on first use (N = offsets.topic.num.partitions). key_type 1 (TRANSACTION) answers the
  leader of `__transaction_state-partition_for(key, transaction.state.log.num.partitions)`.
- Other key types are INVALID_REQUEST, with Kafka's text for the code (none for SHARE, 2, as a broker
  without a share coordinator). v0-3 errors carry the code's text (The coordinator is not available.), as
  Kafka's prepareOldResponse; v4+ entries carry none, as Kafka's.
Version notes: v0-3 carry one `key`; v4+ carry `coordinator_keys` and answer one entry per key.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.handlers._shared.common import response_of
from minikafka.broker.handlers._shared.group import coordinator
from minikafka.broker.wire.cluster import NO_LEADER
from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.hashing import partition_for
from minikafka.coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.build import build
from minikafka.protocol.errors import ErrorCode

API_KEY = ApiKey.FIND_COORDINATOR
VERSIONS = VersionRange(0, 6)
SHARE_KEY_TYPE = 2
# Kafka's Errors.message() of the codes a lookup can fail with.
INVALID_REQUEST_MESSAGE = ("This most likely occurs because of a request being malformed by the client library or "
                           "the message was sent to an incompatible broker. See the broker logs for more details.")
_OLD_VERSION_MESSAGES = {
    ErrorCode.invalid_request: INVALID_REQUEST_MESSAGE,
    ErrorCode.coordinator_not_available: "The coordinator is not available.",
}



def _lookup(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    services = ctx.services
    if key_type == 0:
        groups = coordinator(ctx)
        groups.topic.ensure()
        leader = services.cluster.leader_of(OFFSETS_TOPIC, groups.partition_for(key))
    elif key_type == 1:
        n = services.config.transaction_state_log_num_partitions
        leader = services.cluster.leader_of(TRANSACTION_STATE_TOPIC, partition_for(key, n))
    else:
        # Kafka fails the whole request (CoordinatorType.forId throws), with the code's own text; a SHARE
        # key (2) is answered INVALID_REQUEST alone, as by a broker without a share coordinator.
        return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.invalid_request,
                "error_message": None if key_type == SHARE_KEY_TYPE else INVALID_REQUEST_MESSAGE}
    if leader == NO_LEADER:
        # Kafka: the coordinator partition has no live leader.
        return {"key": key, "node_id": -1, "host": "", "port": -1,
                "error_code": ErrorCode.coordinator_not_available, "error_message": None}
    node = services.cluster.endpoint(ctx.session.listener_name, leader)
    return {
        "key": key,
        "node_id": node.node_id,
        "host": node.host,
        "port": node.port,
        "error_code": ErrorCode.none,
        "error_message": None,
    }


async def handle(ctx: RequestContext, request: Any) -> Any:
    key_type = getattr(request, "key_type", 0)
    if request.__version__ >= 4:
        coordinators = [_lookup(ctx, key, key_type) for key in request.coordinator_keys]
        return build(response_of(request), throttle_time=0, coordinators=coordinators)
    entry = _lookup(ctx, request.key, key_type)
    entry.pop("key")
    if entry["error_code"] != ErrorCode.none and entry["error_message"] is None:
        # v0-3 errors are sent as Kafka's FindCoordinatorResponse.prepareOldResponse: with the code's own text.
        entry["error_message"] = _OLD_VERSION_MESSAGES.get(entry["error_code"])
    return build(response_of(request), throttle_time=0, **entry)
