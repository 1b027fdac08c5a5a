"""What the coordinators raise when they refuse a request, and what they raise when they break.

A coordinator answers with values on success and raises one of these on failure; each carries the
Kafka error code of its cause. It does not decide what a client is shown: broker/wire/errors.py
holds every translation (a failed append to an internal topic shown as NOT_COORDINATOR, codes newer
than the request version). Where a response has one code per member or per partition, the handler
builds it from the exception.
"""

from __future__ import annotations

from minikafka.protocol.errors import ErrorCode, KafkaError


class CoordinatorBug(RuntimeError):
    """An invariant of a coordinator broke (never the client's fault): not a KafkaError, so the
    broker answers UNKNOWN_SERVER_ERROR and logs and counts it as any unexpected exception."""


class GroupError(KafkaError):
    """The group coordinator refuses the request: a group, member, generation or state check failed."""


# Per (topic, partition) of a request: None when done, else why not (the handler shows its code).
PartitionOutcomes = dict[tuple[str, int], GroupError | None]


class InvalidGroupId(GroupError):
    error_code = ErrorCode.invalid_group_id


class GroupIdNotFound(GroupError):
    error_code = ErrorCode.group_id_not_found


class NonEmptyGroup(GroupError):
    error_code = ErrorCode.non_empty_group


class CoordinatorNotAvailable(GroupError):
    """The group is Dead: being unloaded or deleted."""

    error_code = ErrorCode.coordinator_not_available


class UnknownMemberId(GroupError):
    error_code = ErrorCode.unknown_member_id


class FencedInstanceId(GroupError):
    error_code = ErrorCode.fenced_instance_id


class IllegalGeneration(GroupError):
    error_code = ErrorCode.illegal_generation


class StaleMemberEpoch(GroupError):
    error_code = ErrorCode.stale_member_epoch


class RebalanceInProgress(GroupError):
    error_code = ErrorCode.rebalance_in_progress


class InconsistentGroupProtocol(GroupError):
    error_code = ErrorCode.inconsistent_group_protocol


class UnsupportedVersion(GroupError):
    """A consumer-protocol member committing with OffsetCommit older than v9."""

    error_code = ErrorCode.unsupported_version


class GroupSubscribedToTopic(GroupError):
    """OffsetDelete of a partition of a topic the group still consumes (one partition's error)."""

    error_code = ErrorCode.group_subscribed_to_topic


class OffsetMetadataTooLarge(GroupError):
    """A commit's metadata is over `offset.metadata.max.bytes` (one partition's error)."""

    error_code = ErrorCode.offset_metadata_too_large


class TelemetryRefused(KafkaError):
    """The client metrics manager refuses a GetTelemetrySubscriptions or PushTelemetry request."""


class TelemetryThrottled(TelemetryRefused):
    """A request before the push interval has passed (Kafka's ThrottlingQuotaExceededException)."""

    error_code = ErrorCode.throttling_quota_exceeded


class UnknownSubscriptionId(TelemetryRefused):
    error_code = ErrorCode.unknown_subscription_id


class UnsupportedTelemetryCompression(TelemetryRefused):
    error_code = ErrorCode.unsupported_compression_type


class InvalidTelemetryRequest(TelemetryRefused):
    """Not InvalidRequest, which closes the connection: Kafka answers these with the code."""

    error_code = ErrorCode.invalid_request


class InvalidClientMetricsConfig(KafkaError):
    """A client metrics subscription config Kafka's ClientMetricsConfigs.validate refuses with
    InvalidRequestException; its ConfigException and InvalidConfigurationException are INVALID_CONFIG."""

    error_code = ErrorCode.invalid_request


class ShareError(KafkaError):
    """The share-partition layer (coordinator/share) refuses an acknowledgement or a share session."""


class InvalidRecordState(ShareError):
    """An acknowledgement of an offset the member does not hold (Kafka's InvalidRecordStateException)."""

    error_code = ErrorCode.invalid_record_state


class ShareSessionNotFound(ShareError):
    error_code = ErrorCode.share_session_not_found


class InvalidShareSessionEpoch(ShareError):
    error_code = ErrorCode.invalid_share_session_epoch


class InvalidShareRequest(ShareError):
    error_code = ErrorCode.invalid_request
