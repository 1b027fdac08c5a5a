"""Kafka version profiles: the table, how a profile cuts the registry, its defaults, and the coordinator-load
guard the registry puts on coordinator APIs."""

from __future__ import annotations

import asyncio
from types import ModuleType, SimpleNamespace

import pytest
from minikafka.broker.config.config import ConfigError, build_config
from minikafka.broker.config.versions import KAFKA_API_VERSIONS, NEWEST, limit, profile_defaults, resolve
from minikafka.broker.handlers import all_handler_modules
from minikafka.broker.wire.registry import Registry
from minikafka.protocol.api_keys import ApiKey, VersionRange
from minikafka.protocol.errors import ErrorCode, KafkaError


def test_every_served_api_is_in_the_newest_release() -> None:
    """A handler added later must get its row in the table, or the default profile would hide it."""
    served = {int(module.API_KEY) for module in all_handler_modules()}
    assert served <= set(KAFKA_API_VERSIONS[NEWEST])
    assert {key for key, _low, _high in Registry.from_modules(all_handler_modules()).api_versions()} == served


def test_the_default_profile_serves_everything_we_implement() -> None:
    registry = Registry.from_modules(all_handler_modules())
    for module in all_handler_modules():
        route = registry.route(module.API_KEY)
        assert route is not None and route.versions == module.VERSIONS


def test_limit_intersects_and_drops_what_the_release_lacked() -> None:
    assert limit(ApiKey.JOIN_GROUP, VersionRange(0, 9), "4.0") == VersionRange(2, 9)
    assert limit(ApiKey.API_VERSIONS, VersionRange(0, 4), "2.8") == VersionRange(0, 3)
    assert limit(ApiKey.LIST_TRANSACTIONS, VersionRange(0, 1), "2.8") is None
    assert limit(ApiKey.WRITE_TXN_MARKERS, VersionRange(0, 0), "4.0") is None, "no common version"


def test_aliases_and_unknown_versions() -> None:
    assert resolve("3.x") == "3.9" and resolve("2.8") == "2.8"
    assert build_config(environ={}, overrides=["minikafka.kafka.version=3.x"]).kafka_version == "3.9"
    assert build_config(environ={}).kafka_version == NEWEST
    with pytest.raises(ConfigError, match=r"unknown Kafka version '5\.0'"):
        build_config(environ={}, overrides=["minikafka.kafka.version=5.0"])


def test_releases_before_4_0_let_create_time_run_ahead() -> None:
    unlimited = 2**63 - 1
    assert profile_defaults("3.x") == {"log.message.timestamp.after.max.ms": str(unlimited)}
    assert build_config(environ={}, overrides=["minikafka.kafka.version=2.8"]).log_defaults \
        .message_timestamp_after_max_ms == unlimited
    assert build_config(environ={}).log_defaults.message_timestamp_after_max_ms == 3_600_000
    given = build_config(environ={}, overrides=["minikafka.kafka.version=2.8",
                                                "log.message.timestamp.after.max.ms=5000"])
    assert given.log_defaults.message_timestamp_after_max_ms == 5000
    assert "log.message.timestamp.after.max.ms" not in build_config(
        environ={}, overrides=["minikafka.kafka.version=2.8"]).properties, "a default, not a setting"


def test_the_2_8_registry_leaves_out_3_0_apis() -> None:
    registry = Registry.from_modules(all_handler_modules(), "2.8")
    assert registry.route(ApiKey.DESCRIBE_TRANSACTIONS) is None and registry.route(ApiKey.LIST_TRANSACTIONS) is None
    produce = registry.route(ApiKey.PRODUCE)
    assert produce is not None and produce.versions == VersionRange(3, 9) and produce.advertised == VersionRange(0, 9)


def _services(groups_loaded: bool, transactions_loaded: bool) -> SimpleNamespace:
    """One node, which coordinates everything (the NOT_COORDINATOR check before the load check passes)."""
    return SimpleNamespace(groups=SimpleNamespace(loaded=groups_loaded, partition_for=lambda _group: 0),
                           transactions=SimpleNamespace(loaded=transactions_loaded),
                           config=SimpleNamespace(transaction_state_log_num_partitions=50),
                           cluster=SimpleNamespace(sole_node_id=None, leader_of=lambda _topic, _partition: 1))


def _answer(api_key: int, services: SimpleNamespace, request: object) -> object:
    """Through the registry's route for `api_key`, with a stand-in handler under the guard."""

    async def handle(_ctx: object, _request: object) -> object:
        return "answered"

    stand_in = ModuleType("stand_in")
    stand_in.API_KEY, stand_in.VERSIONS, stand_in.handle = api_key, VersionRange(0, 0), handle  # type: ignore[attr-defined]
    route = Registry.from_modules([stand_in]).route(api_key)
    assert route is not None
    return asyncio.run(route.handle(SimpleNamespace(services=services, node=SimpleNamespace(node_id=1)), request))


def test_coordinator_apis_answer_load_in_progress_until_loaded() -> None:
    request = SimpleNamespace(transactional_id="t")
    with pytest.raises(KafkaError) as raised:
        _answer(ApiKey.JOIN_GROUP, _services(False, True), request)
    assert raised.value.error_code == ErrorCode.coordinator_load_in_progress
    with pytest.raises(KafkaError):
        _answer(ApiKey.END_TXN, _services(True, False), request)
    assert _answer(ApiKey.JOIN_GROUP, _services(True, False), request) == "answered"
    assert _answer(ApiKey.INIT_PRODUCER_ID, _services(False, False), SimpleNamespace(transactional_id=None)) \
        == "answered", "an idempotent producer's id does not wait for the transaction coordinator"
    assert _answer(ApiKey.METADATA, _services(False, False), request) == "answered"


def test_the_telemetry_apis_are_served_only_with_a_receiver() -> None:
    """Kafka advertises GetTelemetrySubscriptions and PushTelemetry only with a telemetry receiver plugin;
    minikafka's is `minikafka.client.telemetry.enabled`. ListConfigResources is served either way."""
    without = Registry.from_modules(all_handler_modules(), client_telemetry=False)
    assert without.route(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) is None and without.route(ApiKey.PUSH_TELEMETRY) is None
    assert without.route(ApiKey.LIST_CONFIG_RESOURCES) is not None
    served = Registry.from_modules(all_handler_modules(), "3.7")
    assert served.route(ApiKey.PUSH_TELEMETRY) is not None and served.route(ApiKey.LIST_CONFIG_RESOURCES) is None
    assert Registry.from_modules(all_handler_modules(), "3.6").route(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS) is None
    assert limit(ApiKey.LIST_CONFIG_RESOURCES, VersionRange(0, 1), "4.0") == VersionRange(0, 0)
    assert build_config(environ={}).client_telemetry_enabled is False


def test_the_4_2_rows_are_its_broker_s() -> None:
    """Kafka 4.2 is the default; what it changed from 4.1 (kafka-python's recording of a 4.2 broker), and the admin
    APIs' rows in older releases."""
    assert NEWEST == "4.2"
    older = KAFKA_API_VERSIONS["4.1"]
    changed = {key: (older[key], theirs) for key, theirs in KAFKA_API_VERSIONS["4.2"].items()
               if key in older and older[key] != theirs}
    assert changed == {ApiKey.LIST_OFFSETS: ((1, 10), (1, 11)), ApiKey.OFFSET_COMMIT: ((2, 9), (2, 10)),
                       ApiKey.OFFSET_FETCH: ((1, 9), (1, 10)), ApiKey.WRITE_TXN_MARKERS: ((1, 1), (1, 2)),
                       ApiKey.SHARE_FETCH: ((1, 1), (1, 2)), ApiKey.SHARE_ACKNOWLEDGE: ((1, 1), (1, 2)),
                       ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: ((0, 0), (0, 1))}
    assert {key: KAFKA_API_VERSIONS["4.2"][key] for key in (76, 77, 78, 79, 90, 91, 92)} == {
        76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0)}, "KIP-932 as 4.2 ships it"
    assert limit(ApiKey.ALTER_PARTITION_REASSIGNMENTS, VersionRange(0, 1), "4.0") == VersionRange(0, 0)
    assert limit(ApiKey.ALTER_PARTITION_REASSIGNMENTS, VersionRange(0, 1), "4.1") == VersionRange(0, 1)
    assert limit(ApiKey.DESCRIBE_LOG_DIRS, VersionRange(1, 4), "3.1") == VersionRange(1, 2)
    assert limit(ApiKey.ELECT_LEADERS, VersionRange(0, 2), "2.8") == VersionRange(0, 2)
