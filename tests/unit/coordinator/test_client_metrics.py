"""Client metrics subscriptions and instances (KIP-714), as Kafka's ClientMetricsConfigs and
ClientMetricsManager: validation, matching, subscription ids, push timing and the errors of each step."""

from __future__ import annotations

import uuid

import pytest
from minikafka.coordinator.client_metrics.configs import validate
from minikafka.coordinator.client_metrics.manager import (
    INSTANCE_EXPIRY_MS,
    MAX_POINTS,
    ClientInformation,
    ClientMetricsManager,
    subscription_id,
)
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import Compression
from minikafka.storage.clock import ManualClock

from tests.unit.protocol.test_telemetry import metrics_data

PRODUCER = ClientInformation(client_id="orders-producer", software_name="confluent-kafka-python",
                             software_version="2.16.1-rdkafka-2.16.0", source_address="127.0.0.1", source_port=50000,
                             connection_id=7)


def _code(call: object, *args: object) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(*args)  # type: ignore[operator]
    return raised.value.error_code


@pytest.mark.parametrize(("name", "properties", "code", "message"), [
    ("", {"metrics": "*"}, ErrorCode.invalid_request, "Subscription name can't be empty"),
    ("s", {"metric": "*"}, ErrorCode.invalid_request, "Unknown client metrics configuration: metric"),
    ("s", {"interval.ms": "99"}, ErrorCode.invalid_request,
     "Invalid value 99 for interval.ms, interval must be between 100 and 3600000 (1 hour)"),
    ("s", {"interval.ms": "3600001"}, ErrorCode.invalid_request, "interval must be between"),
    ("s", {"interval.ms": "soon"}, ErrorCode.invalid_config, "Not a number of type INT"),
    ("s", {"match": "client_id"}, ErrorCode.invalid_config, "Illegal client matching pattern: client_id"),
    ("s", {"match": "client_id="}, ErrorCode.invalid_config, "Illegal client matching pattern"),
    ("s", {"match": "client_id=a=b"}, ErrorCode.invalid_config, "Illegal client matching pattern"),
    ("s", {"match": "hostname=x"}, ErrorCode.invalid_config, "Illegal client matching pattern: hostname=x"),
    ("s", {"match": "client_id=(unclosed"}, ErrorCode.invalid_config, "Illegal client matching pattern"),
])
def test_validation_as_kafka(name: str, properties: dict[str, str], code: ErrorCode, message: str) -> None:
    with pytest.raises(KafkaError, match=message.replace("(", r"\(").replace(")", r"\)")) as raised:
        validate(name, properties)
    assert raised.value.error_code == code


def test_valid_subscriptions_pass() -> None:
    validate("s", {"metrics": "org.apache.kafka.producer., org.apache.kafka.consumer.", "interval.ms": "100",
                   "match": "client_id=orders-.*, client_software_name=confluent-kafka-python"})
    validate("s", {})


def test_a_new_client_gets_an_id_and_the_union_of_what_it_matches() -> None:
    manager = ClientMetricsManager(ManualClock(), 1024)
    manager.update_subscription("latency", {"metrics": "org.apache.kafka.producer.node.request.latency",
                                            "interval.ms": "2000"})
    manager.update_subscription("queue", {"metrics": "org.apache.kafka.producer.record.queue", "interval.ms": "500",
                                          "match": "client_id=orders-.*"})
    manager.update_subscription("consumers", {"metrics": "*", "match": "client_id=consumer-.*"})
    instance = manager.get_subscriptions(None, PRODUCER)
    assert instance.instance_id.int != 0
    assert instance.metrics == ("org.apache.kafka.producer.node.request.latency",
                                "org.apache.kafka.producer.record.queue")
    assert instance.push_interval_ms == 500 and instance.subscriptions == ("latency", "queue")
    assert instance.subscription_id == subscription_id(instance.metrics, 500, instance.instance_id)


def test_star_is_every_metric_and_no_match_is_none_every_five_minutes() -> None:
    manager = ClientMetricsManager(ManualClock(), 1024)
    manager.update_subscription("all", {"metrics": "*,org.apache.kafka.producer."})
    assert manager.get_subscriptions(None, PRODUCER).metrics == ("*",)
    manager.update_subscription("all", {})
    nothing = manager.get_subscriptions(None, PRODUCER)
    assert nothing.metrics == () and nothing.push_interval_ms == 300_000


def test_match_patterns_match_whole_attributes() -> None:
    manager = ClientMetricsManager(ManualClock(), 1024)
    manager.update_subscription("s", {"metrics": "*", "match": "client_id=orders"})
    assert manager.get_subscriptions(None, PRODUCER).metrics == (), "orders does not match orders-producer"
    manager.update_subscription("s", {"metrics": "*", "match": "client_id=orders.*,client_source_port=5000."})
    assert manager.get_subscriptions(None, PRODUCER).metrics == ("*",)
    manager.update_subscription("s", {"metrics": "*", "match": "client_software_version=1\\..*"})
    assert manager.get_subscriptions(None, PRODUCER).metrics == ()


def test_an_early_get_is_throttled_until_the_interval_passes() -> None:
    clock = ManualClock()
    manager = ClientMetricsManager(clock, 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    instance_id = manager.get_subscriptions(None, PRODUCER).instance_id
    assert _code(manager.get_subscriptions, instance_id, PRODUCER) == ErrorCode.throttling_quota_exceeded
    clock.advance(1000)
    assert manager.get_subscriptions(instance_id, PRODUCER).instance_id == instance_id


def test_a_subscription_change_is_seen_at_once_and_fails_the_old_id() -> None:
    clock = ManualClock()
    manager = ClientMetricsManager(clock, 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    first = manager.get_subscriptions(None, PRODUCER)
    old_id = first.subscription_id
    manager.update_subscription("s", {"metrics": "org.apache.kafka.", "interval.ms": "1000"})
    code = _code(manager.push, first.instance_id, old_id, False, Compression.ZSTD, b"", PRODUCER)
    assert code == ErrorCode.unknown_subscription_id
    again = manager.get_subscriptions(first.instance_id, PRODUCER)
    assert again.metrics == ("org.apache.kafka.",) and again.subscription_id != old_id


def test_pushes_keep_the_latest_points_and_add_up_delta_sums() -> None:
    clock = ManualClock()
    manager = ClientMetricsManager(clock, 1024 * 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    instance = manager.get_subscriptions(None, PRODUCER)
    for _ in range(2):
        manager.push(instance.instance_id, instance.subscription_id, False, Compression.NONE, metrics_data(), PRODUCER)
        clock.advance(1000)
    kept = manager.instance(instance.instance_id)
    assert kept is not None and kept.pushes == 2 and len(kept.points) == 3
    assert kept.totals[("org.apache.kafka.producer.record.send.total", ())] == 14.0
    assert kept.resource == {"client_rack": "r1"}


@pytest.mark.parametrize(("setup", "code"), [
    ("early", ErrorCode.throttling_quota_exceeded),
    ("stale subscription", ErrorCode.unknown_subscription_id),
    ("codec 9", ErrorCode.unsupported_compression_type),
    ("too large", ErrorCode.telemetry_too_large),
    ("corrupt", ErrorCode.invalid_record),
    ("after terminating", ErrorCode.invalid_request),
])
def test_push_errors(setup: str, code: ErrorCode) -> None:
    clock = ManualClock()
    manager = ClientMetricsManager(clock, 64)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    instance = manager.get_subscriptions(None, PRODUCER)
    args: list[object] = [instance.instance_id, instance.subscription_id, False, Compression.NONE, b"", PRODUCER]
    if setup == "early":
        manager.push(*args)  # the first push after a get is never early
    elif setup == "stale subscription":
        args[1] = instance.subscription_id + 1
    elif setup == "codec 9":
        args[3] = 9
    elif setup == "too large":
        args[4] = b"x" * 65
    elif setup == "corrupt":
        args[4] = b"\xff\xff\xff"
    else:
        manager.push(instance.instance_id, instance.subscription_id, True, Compression.NONE, b"", PRODUCER)
        clock.advance(1000)
    assert _code(manager.push, *args) == code
    kept = manager.instance(instance.instance_id)
    assert kept is not None and kept.last_error == code
    assert kept.throttled == (1 if code == ErrorCode.throttling_quota_exceeded else 0)
    assert kept.push_errors == (1 if code == ErrorCode.invalid_record else 0)
    assert manager.unknown_subscription_requests == (1 if code == ErrorCode.unknown_subscription_id else 0)


def test_a_terminating_push_is_never_early_and_reserved_ids_are_invalid() -> None:
    manager = ClientMetricsManager(ManualClock(), 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    instance = manager.get_subscriptions(None, PRODUCER)
    manager.push(instance.instance_id, instance.subscription_id, False, Compression.NONE, b"", PRODUCER)
    manager.push(instance.instance_id, instance.subscription_id, True, Compression.NONE, b"", PRODUCER)
    for reserved in (None, uuid.UUID(int=0), uuid.UUID(int=1)):
        assert _code(manager.push, reserved, 0, False, 0, b"", PRODUCER) == ErrorCode.invalid_request


def test_a_get_after_a_failed_push_of_unknown_subscription_is_not_throttled() -> None:
    manager = ClientMetricsManager(ManualClock(), 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    instance = manager.get_subscriptions(None, PRODUCER)
    _code(manager.push, instance.instance_id, instance.subscription_id + 1, False, 0, b"", PRODUCER)
    assert manager.get_subscriptions(instance.instance_id, PRODUCER).instance_id == instance.instance_id


def test_instances_expire_and_are_bounded() -> None:
    clock = ManualClock()
    manager = ClientMetricsManager(clock, 1024)
    manager.update_subscription("s", {"metrics": "*", "interval.ms": "1000"})
    manager.get_subscriptions(None, PRODUCER)
    clock.advance(INSTANCE_EXPIRY_MS - 1)
    assert len(manager.instances()) == 1
    clock.advance(1)
    assert manager.instances() == []


def test_points_kept_per_instance_are_bounded() -> None:
    from minikafka.protocol.telemetry import MetricPoint

    manager = ClientMetricsManager(ManualClock(), 1024)
    instance = manager.get_subscriptions(None, PRODUCER)
    instance.keep({}, tuple(MetricPoint(f"m{i}", "gauge", float(i)) for i in range(MAX_POINTS + 5)))
    assert len(instance.points) == MAX_POINTS and instance.points_dropped == 5
