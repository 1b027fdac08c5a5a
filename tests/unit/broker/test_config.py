"""Broker configuration: Kafka's key names, precedence, and clear errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from minikafka.broker.config.config import ConfigError, Listener, build_config, env_properties, parse_properties


def test_properties_file_syntax() -> None:
    text = "# comment\n! also comment\nlisteners=PLAINTEXT://0.0.0.0:9093\nnum.partitions: 3\n" \
           "log.dirs = /tmp/a,\\\n   /tmp/b\nempty.key\n"
    props = parse_properties(text)
    assert props["listeners"] == "PLAINTEXT://0.0.0.0:9093"
    assert props["num.partitions"] == "3"
    assert props["log.dirs"] == "/tmp/a,/tmp/b"
    assert props["empty.key"] == ""


def test_precedence_file_env_override_flags(tmp_path: Path) -> None:
    path = tmp_path / "server.properties"
    path.write_text("num.partitions=2\nlisteners=PLAINTEXT://127.0.0.1:19092\nlog.dirs=/from/file\n")
    config = build_config(properties_file=path, environ={"MINIKAFKA_NUM_PARTITIONS": "4"}, overrides=[])
    assert config.num_partitions == 4
    assert config.port == 19092
    assert config.data_dir == Path("/from/file")
    config = build_config(properties_file=path, environ={"MINIKAFKA_NUM_PARTITIONS": "4"},
                          overrides=["num.partitions=6"], port=0, data_dir=tmp_path)
    assert config.num_partitions == 6
    assert config.port == 0
    assert config.data_dir == tmp_path


def test_defaults_match_the_product_card() -> None:
    config = build_config(environ={})
    assert (config.host, config.port, config.data_dir) == ("127.0.0.1", 9092, Path("./data"))
    assert config.auto_create_topics is True
    assert config.socket_request_max_bytes == 104857600
    assert config.log_defaults.max_message_bytes == 1048588


def test_env_names_map_to_kafka_keys() -> None:
    assert env_properties({"MINIKAFKA_LOG_RETENTION_MS": "5", "OTHER": "x"}) == {"log.retention.ms": "5"}


def test_storage_keys_reach_log_defaults() -> None:
    config = build_config(environ={}, overrides=["log.segment.bytes=4096", "message.max.bytes=2000000"])
    assert config.log_defaults.segment_bytes == 4096
    assert config.log_defaults.max_message_bytes == 2000000


def test_unknown_keys_are_reported_not_fatal() -> None:
    config = build_config(environ={}, overrides=["no.such.key=1"])
    assert config.unknown_keys == ("no.such.key",)


@pytest.mark.parametrize("override", ["num.partitions=many", "auto.create.topics.enable=maybe",
                                      "log.segment.bytes=big", "listeners=nonsense", "novalue"])
def test_bad_values_are_clear_errors(override: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config(environ={}, overrides=[override])
    assert override.split("=")[0] in str(info.value) or "listener" in str(info.value)


def test_listener_parsing() -> None:
    assert Listener.parse("PLAINTEXT://[::1]:9092") == Listener("PLAINTEXT", "::1", 9092)
    assert Listener.parse("PLAINTEXT://:9092").host == "0.0.0.0"


def test_transaction_version_is_0_1_or_2() -> None:
    assert build_config(environ={}, overrides=[]).transaction_version == 0
    assert build_config(environ={}, overrides=["transaction.version=1"]).transaction_version == 1
    assert build_config(environ={}, overrides=["transaction.version=2"]).transaction_version == 2
    for bad in ("3", "-1", "x"):
        with pytest.raises(ConfigError, match=r"transaction\.version"):
            build_config(environ={}, overrides=[f"transaction.version={bad}"])
