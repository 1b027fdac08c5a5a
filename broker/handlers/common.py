"""Small helpers shared by handlers: partition lookup and error fields."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minikafka.protocol.errors import ErrorCode
from minikafka.storage.errors import UnknownTopicOrPartition

from ..errors import error_code_for, error_message_for

if TYPE_CHECKING:
    from minikafka.storage.log import PartitionLog

    from ..context import RequestContext


def partition_log(ctx: RequestContext, topic: str, partition: int) -> PartitionLog:
    log = ctx.services.logs.partition(topic, partition)
    if log is None:
        raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist on this node")
    return log


def error_fields(exc: BaseException) -> dict[str, Any]:
    return {"error_code": error_code_for(exc), "error_message": error_message_for(exc)}


def response_of(request: Any) -> type:
    from minikafka.protocol.codec import response_class

    return response_class(request.__api_key__, request.__version__)


def fenced_code_for(ctx: RequestContext, code: ErrorCode, first_version_knowing_fenced: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) as older request versions understand it: INVALID_PRODUCER_EPOCH.

    Kafka does the same per API in KafkaApis; clients of those versions map the new code to an
    unknown error instead of fencing themselves.
    """
    if code is ErrorCode.producer_fenced and ctx.api_version < first_version_knowing_fenced:
        return ErrorCode.invalid_producer_epoch
    return code
