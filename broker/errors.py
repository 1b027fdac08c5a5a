"""The one place where exceptions become Kafka error codes."""

from __future__ import annotations

import structlog
from minikafka.protocol.errors import ErrorCode, KafkaError

_log = structlog.get_logger("minikafka.errors")


def error_code_for(exc: BaseException) -> ErrorCode:
    """Kafka error code of `exc`; anything unexpected is UNKNOWN_SERVER_ERROR and logged once."""
    if isinstance(exc, KafkaError):
        return exc.error_code
    _log.error("unexpected error", exc_info=exc)
    return ErrorCode.unknown_server_error


def error_message_for(exc: BaseException) -> str | None:
    return str(exc) or None if isinstance(exc, KafkaError) else "unexpected server error"
