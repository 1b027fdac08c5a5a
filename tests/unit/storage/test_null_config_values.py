"""Topic configs arrive as nullable strings; a null is Kafka's INVALID_CONFIG, never a crash."""

from __future__ import annotations

import pytest
from minikafka.protocol.errors import ErrorCode
from minikafka.storage.config import LogConfig, resolve_log_config
from minikafka.storage.errors import InvalidConfig


def test_null_values_are_refused_together_with_kafkas_message() -> None:
    expected = r"^Null value not supported for topic configs: segment\.bytes,segment\.ms$"
    with pytest.raises(InvalidConfig, match=expected) as caught:
        resolve_log_config(LogConfig(), {"segment.jitter.ms": "10", "segment.bytes": None, "segment.ms": None})
    assert caught.value.error_code == ErrorCode.invalid_config


def test_null_value_is_checked_before_unknown_keys() -> None:
    # Kafka looks for nulls before validating any key, so the null is what the client is told about.
    with pytest.raises(InvalidConfig, match="Null value not supported"):
        resolve_log_config(LogConfig(), {"no.such.key": "1", "retention.ms": None})
