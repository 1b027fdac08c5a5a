"""The one place where exceptions become the Kafka error codes a client sees.

Coordinators and storage raise KafkaErrors carrying their own codes and decide nothing about what a
client is shown. The translations follow Kafka's KafkaApis and coordinators, each in one table here
rather than in coordinators or as version literals in handlers:
- A coordinator whose append to `__consumer_offsets` or `__transaction_state` fails with
  KAFKA_STORAGE_ERROR answers NOT_COORDINATOR (GroupMetadataManager / TransactionStateManager map
  log append errors that way), so the client looks the coordinator up again and retries;
  FindCoordinator, when the internal topic cannot be created, answers COORDINATOR_NOT_AVAILABLE.
  The coordinators raise (or, to members waiting in JoinGroup/SyncGroup, pass on) the storage
  error's own code; members waiting in JoinGroup/SyncGroup are shown it as Kafka's storeGroup maps it.
- A transaction version 2 Produce whose partition the coordinator cannot add yet is answered with a
  code older producers retry (NOT_ENOUGH_REPLICAS), as Kafka's ReplicaManager does.
- Codes newer than the request version are shown as the code that version's clients understand:
  PRODUCER_FENCED (KIP-588) as INVALID_PRODUCER_EPOCH, COORDINATOR_LOAD_IN_PROGRESS to TxnOffsetCommit
  v0-1 as COORDINATOR_NOT_AVAILABLE (KAFKA-7296), KAFKA_STORAGE_ERROR to Fetch v0-5 as
  NOT_LEADER_OR_FOLLOWER (older consumers treat the new code as fatal).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.protocol.api_keys import ApiKey, api_name
from minikafka.protocol.errors import ErrorCode, KafkaError

if TYPE_CHECKING:
    from minikafka.broker.wire.context import RequestContext

_log = structlog.get_logger("minikafka.errors")

UNEXPECTED_ERROR_MESSAGE = "unexpected server error"


class CloseConnection(Exception):
    """The request cannot be answered; Kafka closes the connection in these cases.

    `bad_input` is False where the close is not the client's fault (an injected drop, a failed acks=0
    produce), so metrics count only what clients got wrong."""

    def __init__(self, reason: str, *, bad_input: bool = True) -> None:
        super().__init__(reason)
        self.bad_input = bad_input


@dataclass(frozen=True, slots=True)
class Downgrade:
    """`code` is known to clients from request version `known_from`; older versions see `shown_as`."""

    known_from: int
    shown_as: ErrorCode


# (api key, code) -> downgrade; cut-offs as in Kafka's KafkaApis (handleInitProducerIdRequest,
# handleEndTxnRequest, handleAddPartitionsToTxnRequest, handleAddOffsetsToTxnRequest,
# handleTxnOffsetCommitRequest, handleFetchRequest's maybeDownConvertStorageError).
DOWNGRADES: Mapping[tuple[int, ErrorCode], Downgrade] = {
    (ApiKey.INIT_PRODUCER_ID, ErrorCode.producer_fenced): Downgrade(4, ErrorCode.invalid_producer_epoch),
    (ApiKey.END_TXN, ErrorCode.producer_fenced): Downgrade(2, ErrorCode.invalid_producer_epoch),
    (ApiKey.ADD_PARTITIONS_TO_TXN, ErrorCode.producer_fenced): Downgrade(2, ErrorCode.invalid_producer_epoch),
    (ApiKey.ADD_OFFSETS_TO_TXN, ErrorCode.producer_fenced): Downgrade(2, ErrorCode.invalid_producer_epoch),
    (ApiKey.TXN_OFFSET_COMMIT, ErrorCode.coordinator_load_in_progress):
        Downgrade(2, ErrorCode.coordinator_not_available),
    (ApiKey.FETCH, ErrorCode.kafka_storage_error): Downgrade(6, ErrorCode.not_leader_or_follower),
}

# APIs answered by the group or transaction coordinator: their storage errors come from appends to
# the internal topics.
COORDINATOR_APIS: frozenset[int] = frozenset({
    ApiKey.OFFSET_COMMIT, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP, ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP,
    ApiKey.DELETE_GROUPS, ApiKey.OFFSET_DELETE, ApiKey.INIT_PRODUCER_ID, ApiKey.ADD_PARTITIONS_TO_TXN,
    ApiKey.ADD_OFFSETS_TO_TXN, ApiKey.END_TXN, ApiKey.TXN_OFFSET_COMMIT,
})
COORDINATOR_APPEND_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}
FIND_COORDINATOR_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    ErrorCode.kafka_storage_error: ErrorCode.coordinator_not_available,
}
# Kafka's GroupMetadataManager.storeGroup: what the members waiting in JoinGroup or SyncGroup are told
# when their group's record cannot be appended.
GROUP_STORE_ERRORS: Mapping[ErrorCode, ErrorCode] = {
    **COORDINATOR_APPEND_ERRORS,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}
# Kafka's ReplicaManager, for the partition a transaction version 2 Produce adds to its transaction:
# coordinator errors an older producer would not retry are shown as one it does.
PRODUCE_ADD_PARTITION_ERRORS: Mapping[ErrorCode, ErrorCode] = dict.fromkeys(
    (ErrorCode.concurrent_transactions, ErrorCode.coordinator_load_in_progress,
     ErrorCode.coordinator_not_available, ErrorCode.not_coordinator),
    ErrorCode.not_enough_replicas,
)


def shown_code(api_key: int, api_version: int, code: ErrorCode) -> ErrorCode:
    """The code a client of this API and version is shown for `code`."""
    if api_key in COORDINATOR_APIS:
        code = COORDINATOR_APPEND_ERRORS.get(code, code)
    elif api_key == ApiKey.FIND_COORDINATOR:
        code = FIND_COORDINATOR_ERRORS.get(code, code)
    downgrade = DOWNGRADES.get((api_key, code))
    if downgrade is not None and api_version < downgrade.known_from:
        return downgrade.shown_as
    return code


def translate(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
    return shown_code(ctx.api_key, ctx.api_version, code)


def shown_member_code(api_key: int, api_version: int, code: ErrorCode) -> ErrorCode:
    """The code a JoinGroup or SyncGroup member is shown for the `code` of its result."""
    return shown_code(api_key, api_version, GROUP_STORE_ERRORS.get(code, code))


def member_code(ctx: RequestContext, code: ErrorCode) -> ErrorCode:
    return shown_member_code(ctx.api_key, ctx.api_version, code)


def record_unexpected(ctx: RequestContext | None, exc: BaseException, **where: Any) -> None:
    """Log an unexpected exception once, with its stack trace, and count it per API."""
    if ctx is None:
        _log.error("unexpected error", exc_info=exc, **where)
        return
    ctx.log.error("unexpected error", exc_info=exc, **where)
    ctx.services.metrics.count_unexpected(api_name(ctx.api_key))


def error_code_for(exc: BaseException, ctx: RequestContext | None = None, **where: Any) -> ErrorCode:
    """Kafka error code of `exc` as the request's client is shown it.

    Anything that is not a KafkaError is UNKNOWN_SERVER_ERROR, logged with its stack trace and
    counted. `where` (topic, partition, ...) is logged with it.
    """
    if isinstance(exc, KafkaError):
        code = exc.error_code
    else:
        record_unexpected(ctx, exc, **where)
        code = ErrorCode.unknown_server_error
    return translate(ctx, code) if ctx is not None else code


def outcome_code(ctx: RequestContext, outcome: BaseException | None) -> ErrorCode:
    """The code of one member's or partition's outcome, as a coordinator reports it: None is success."""
    return ErrorCode.none if outcome is None else error_code_for(outcome, ctx)


def error_message_for(exc: BaseException) -> str | None:
    # Unexpected exceptions may carry internals (paths, reprs): the client gets a fixed text.
    return str(exc) or None if isinstance(exc, KafkaError) else UNEXPECTED_ERROR_MESSAGE


def error_fields(ctx: RequestContext, exc: BaseException, **where: Any) -> dict[str, Any]:
    """`error_code` and `error_message` of a response entry for `exc`, and the KIP-951 `current_leader` of a
    NOT_LEADER_OR_FOLLOWER (response versions without the field drop it)."""
    fields = {"error_code": error_code_for(exc, ctx, **where), "error_message": error_message_for(exc)}
    leader = getattr(exc, "current_leader", None)
    if leader is not None:
        fields["current_leader"] = leader
    return fields
