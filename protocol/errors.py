"""Kafka error codes and the exception base every layer raises.

Domain exceptions carry the Kafka error code they map to, so the broker has exactly one place
(`minikafka.broker.wire.errors.error_code_for`) that turns an exception into a response code.
"""

from __future__ import annotations

from typing import ClassVar

from kio.schema.errors import ErrorCode

__all__ = ["ErrorCode", "InvalidRequest", "KafkaError"]


class KafkaError(Exception):
    """An error that has a Kafka error code; subclasses set `error_code`."""

    error_code: ClassVar[ErrorCode] = ErrorCode.unknown_server_error

    def __init__(self, message: str = "", *, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.error_code = code  # type: ignore[misc]


class InvalidRequest(KafkaError):
    """The bytes of a request could not be decoded; Kafka closes the connection for these."""

    error_code = ErrorCode.invalid_request


class CorruptRecord(KafkaError):
    error_code = ErrorCode.corrupt_message


class DecompressedTooLarge(CorruptRecord):
    """Compressed data that would decompress to more than the reader allows (a "zip bomb" or an honest
    payload over a configured maximum); readers that answer the two differently tell them apart by this."""


class UnsupportedCompression(KafkaError):
    error_code = ErrorCode.unsupported_compression_type
