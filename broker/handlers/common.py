"""Small helpers shared by handlers: partition lookup and the response class.

Exceptions become error codes in one place, `..errors` (error_code_for, error_fields), which also
holds the per-API, per-version translations (PRODUCER_FENCED to old clients and the like).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minikafka.storage.errors import UnknownTopicOrPartition

if TYPE_CHECKING:
    from minikafka.storage.log import PartitionLog

    from ..context import RequestContext


def partition_log(ctx: RequestContext, topic: str, partition: int) -> PartitionLog:
    log = ctx.services.logs.partition(topic, partition)
    if log is None:
        raise UnknownTopicOrPartition(f"{topic}-{partition} does not exist on this node")
    return log


def response_of(request: Any) -> type:
    from minikafka.protocol.codec import response_class

    return response_class(request.__api_key__, request.__version__)
