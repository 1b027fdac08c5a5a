"""Client quotas (KIP-546 admin APIs, Kafka's throttling) with real clients and on the wire.

Throttling: confluent-kafka (its throttle callback and statistics) and kafka-python (its metrics) producers
over a producer_byte_rate are held to it while producers with other client ids are not throttled; a
confluent-kafka consumer over a consumer_byte_rate is throttled. The rates are measured as the clients see
them, after the first quota window's worth of bytes (what Kafka lets through before its rate spans a whole
window). Exact throttle times (Kafka's formulas) are checked on the wire under the manual clock, with
fresh connections where the mute of a throttled one would only make the test wait.
DescribeClientQuotas/AlterClientQuotas: neither confluent-kafka 2.16 nor kafka-python 3.0 has them, so they
go through `minikafka configs` (tools/configs.py, over the wire) and raw requests.
"""

from __future__ import annotations

import io
import json
import re
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaProducer
from kio.schema.create_partitions.v3.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_topics.v5.request import CreatableTopic as CreatableTopicV5
from kio.schema.create_topics.v5.request import CreateTopicsRequest as CreateTopicsV5
from kio.schema.create_topics.v7.request import CreatableTopic, CreateTopicsRequest
from kio.schema.delete_topics.v6.request import DeleteTopicsRequest, DeleteTopicState
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema
from minikafka.protocol.errors import ErrorCode
from minikafka.protocol.records import Record, build_batch
from minikafka.testing import Broker
from minikafka.tools.admin_client import AdminClient, AdminError
from minikafka.tools.configs import alter_quotas, describe_quotas
from minikafka.tools.configs import main as configs_main
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.produce import produce
from tests.support.wire import Wire

QUOTA = 100_000  # bytes per second
# Two samples of one second: Kafka's rate then spans one to two seconds, so a test of a few seconds sees
# the steady rate rather than the first burst (with the default 11 samples the first 10 s's worth passes).
SHORT_WINDOWS = {"quota.window.num": "2", "quota.window.size.seconds": "1"}
BURST = QUOTA * (2 - 1) * 1
VALUE = b"x" * 2000
COUNT = 300  # 600 kB: about five seconds at the quota
MANUAL = {"minikafka.clock": "manual"}
DOCS = Path(__file__).resolve().parents[2] / "docs" / "telemetry-and-quotas.md"


def _set_quota(broker: Broker, entity: tuple[tuple[str, str | None], ...], **values: float) -> None:
    with AdminClient(broker.bootstrap_servers) as client:
        alter_quotas(client.any_broker(), entity, dict(values), [])


def _steady_rate(acks: list[tuple[float, int]]) -> float:
    """Bytes per second acknowledged after the first BURST bytes."""
    total, start = 0, None
    counted = 0
    for at, size in acks:
        if start is None:
            total += size
            if total > BURST:
                start = at
            continue
        counted += size
    assert start is not None and acks[-1][0] > start
    return counted / (acks[-1][0] - start)


def _exchange(broker: Broker, request: Any, client_id: str, *, wire: Wire | None = None) -> Any:
    own = wire is None
    wire = wire or Wire(broker)
    try:
        wire.send(encode_request(1, request, client_id))
        _corr, response = decode_response(wire.receive(), request.__api_key__, request.__version__)
        return response
    finally:
        if own:
            wire.close()


def _produce_request(topic: str, size: int) -> ProduceRequest:
    batch = build_batch([Record(None, b"v" * size, (), int(time.time() * 1000))])
    return ProduceRequest(transactional_id=None, acks=-1, timeout=timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),))


def _ms(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)


# --- producers held to their byte rate -------------------------------------------------------------------


def test_confluent_producer_is_held_to_its_byte_rate_and_others_are_not(record_property: Any) -> None:
    with Broker(SHORT_WINDOWS) as broker:
        topic = unique_topic("quota")
        create_topic(broker.bootstrap_servers, topic)
        _set_quota(broker, (("client-id", "slow-producer"),), producer_byte_rate=QUOTA)
        throttles: dict[str, list[int]] = {"slow-producer": [], "fast-producer": []}
        stats: dict[str, list[dict[str, Any]]] = {"slow-producer": [], "fast-producer": []}

        def producer(client_id: str) -> Producer:
            return Producer({
                "bootstrap.servers": broker.bootstrap_servers, "client.id": client_id,
                "linger.ms": 5, "batch.size": 10_000, "statistics.interval.ms": 500,
                "throttle_cb": lambda event: throttles[client_id].append(event.throttle_time),
                "stats_cb": lambda text: stats[client_id].append(json.loads(text))})

        acks: list[tuple[float, int]] = []

        def produce_slowly() -> None:
            slow = producer("slow-producer")
            for _ in range(COUNT):
                slow.produce(topic, VALUE, on_delivery=lambda error, message: acks.append(
                    (time.monotonic(), len(message.value()))) if error is None else None)
                slow.poll(0)
            assert slow.flush(60) == 0

        slow_thread = threading.Thread(target=produce_slowly)
        slow_thread.start()
        fast = producer("fast-producer")
        for _ in range(COUNT):  # alongside the throttled one, over the same broker
            fast.produce(topic, VALUE)
            fast.poll(0)
        assert fast.flush(60) == 0
        fast.poll(1)  # a last statistics report
        slow_thread.join(90)
        assert not slow_thread.is_alive()

        rate = _steady_rate(acks)
        record_property("confluent_producer_rate", round(rate))
        assert len(acks) == COUNT
        assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, rate
        # librdkafka reports the response's throttle_time_ms, in its callback and its broker statistics.
        assert max(throttles["slow-producer"]) > 0
        assert any(broker_stats["throttle"]["max"] > 0 for report in stats["slow-producer"]
                   for broker_stats in report["brokers"].values())
        assert not any(throttles["fast-producer"])
        assert all(broker_stats["throttle"]["max"] == 0 for report in stats["fast-producer"]
                   for broker_stats in report["brokers"].values())


def test_kafka_python_producer_is_held_to_its_byte_rate_and_others_are_not(record_property: Any) -> None:
    with Broker(SHORT_WINDOWS) as broker:
        topic = unique_topic("quota-kp")
        create_topic(broker.bootstrap_servers, topic)
        _set_quota(broker, (("client-id", "slow-kp"),), producer_byte_rate=QUOTA)
        acks: list[tuple[float, int]] = []
        slow = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="slow-kp", linger_ms=5,
                             batch_size=10_000)
        fast = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, client_id="fast-kp", linger_ms=5,
                             batch_size=10_000)
        try:
            for _ in range(COUNT):
                # Called on the producer's I/O thread as each response is read.
                slow.send(topic, VALUE).add_callback(lambda _meta: acks.append((time.monotonic(), len(VALUE))))
                fast.send(topic, VALUE)
            fast.flush(60)
            slow.flush(90)
            slow_metrics, fast_metrics = slow.metrics()["producer-metrics"], fast.metrics()["producer-metrics"]
        finally:
            slow.close(5)
            fast.close(5)
        rate = _steady_rate(acks)
        record_property("kafka_python_producer_rate", round(rate))
        assert len(acks) == COUNT
        assert QUOTA * 0.8 <= rate <= QUOTA * 1.2, rate
        # kafka-python records every Produce response's throttle_time_ms in its sender metrics.
        assert slow_metrics["throttle-time-max"] > 0
        assert fast_metrics["throttle-time-max"] <= 0


def test_confluent_consumer_is_throttled_by_its_fetch_byte_rate(record_property: Any) -> None:
    with Broker(SHORT_WINDOWS) as broker:
        topic = unique_topic("quota-fetch")
        create_topic(broker.bootstrap_servers, topic)
        produce(broker.bootstrap_servers, topic, [VALUE] * COUNT, **{"batch.size": 10_000, "linger.ms": 5})
        _set_quota(broker, (("client-id", "slow-consumer"),), consumer_byte_rate=QUOTA)
        rates: dict[str, float] = {}
        throttles: dict[str, list[int]] = {"slow-consumer": [], "fast-consumer": []}
        for client_id in ("slow-consumer", "fast-consumer"):
            consumer = Consumer({
                "bootstrap.servers": broker.bootstrap_servers, "client.id": client_id, "group.id": client_id,
                # Fetches of 20 kB: the rate moves in steps of one response.
                "fetch.max.bytes": 20_000, "max.partition.fetch.bytes": 20_000, "message.max.bytes": 10_000,
                "throttle_cb": lambda event, c=client_id: throttles[c].append(event.throttle_time)})
            consumer.assign([TopicPartition(topic, 0, 0)])
            received: list[tuple[float, int]] = []
            deadline = time.monotonic() + 60
            try:
                while len(received) < COUNT and time.monotonic() < deadline:
                    message = consumer.poll(0.5)
                    if message is not None and message.error() is None:
                        received.append((time.monotonic(), len(message.value())))
            finally:
                consumer.close()
            assert len(received) == COUNT
            rates[client_id] = _steady_rate(received)
        record_property("consumer_rates", {k: round(v) for k, v in rates.items()})
        assert max(throttles["slow-consumer"]) > 0
        assert rates["slow-consumer"] <= QUOTA * 1.2
        assert not any(throttles["fast-consumer"])


# --- exact throttle times on the wire --------------------------------------------------------------------


def test_produce_throttle_time_and_mute_are_kafkas() -> None:
    """11 windows of 1 s, 1000 B/s: a first request of S bytes is S / 10 s, so its throttle is S - 10000 ms."""
    with Broker(MANUAL) as broker:
        topic = unique_topic("quota-wire")
        create_topic(broker.bootstrap_servers, topic)
        _set_quota(broker, (("client-id", "wire"),), producer_byte_rate=1000)
        request = _produce_request(topic, 10_400)
        size = len(encode_request(1, request, "wire")) - 4  # Kafka counts the request without its size prefix
        wire = Wire(broker)
        try:
            first = _exchange(broker, request, "wire", wire=wire)
            assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
            assert _ms(first.throttle_time) == size - 10_000 > 0
            # The channel is muted for that long: the next request is read only after it.
            started = time.monotonic()
            second = _exchange(broker, _produce_request(topic, 10), "wire", wire=wire)
            assert time.monotonic() - started >= (size - 10_000) / 1000
        finally:
            wire.close()
        # (size + second request) / 10 s, with the broker clock standing still
        assert _ms(second.throttle_time) > size - 10_000
        other = _exchange(broker, _produce_request(topic, 10_400), "someone-else")
        assert _ms(other.throttle_time) == 0
        second_size = len(encode_request(1, _produce_request(topic, 10), "wire")) - 4
        samples = {(family.name, sample.labels.get("quota"), sample.labels["client_id"]): sample.value
                   for family in text_string_to_metric_families(broker.metrics())
                   for sample in family.samples if family.name.startswith(("kafka_server_produce", "minikafka_quota"))}
        assert samples[("kafka_server_produce_byte_rate", None, "wire")] == (size + second_size) / 10
        assert samples[("minikafka_quota_throttled_responses", "producer_byte_rate", "wire")] == 2
        assert samples[("minikafka_quota_throttle_time_ms", "producer_byte_rate", "wire")] == \
            _ms(first.throttle_time) + _ms(second.throttle_time)
        # Once any client has a produce quota, Kafka records every client (it has no quota: never throttled).
        assert samples[("minikafka_quota_throttled_responses", "producer_byte_rate", "someone-else")] == 0


def test_user_quota_wins_over_client_id_quota() -> None:
    """Kafka's precedence: a user's quota (here the unauthenticated principal, ANONYMOUS) before a client-id's."""
    with Broker(MANUAL) as broker:
        topic = unique_topic("quota-user")
        create_topic(broker.bootstrap_servers, topic)
        _set_quota(broker, (("client-id", "app"),), producer_byte_rate=10**9)
        _set_quota(broker, (("user", None),), producer_byte_rate=1000)  # every user's own
        request = _produce_request(topic, 10_400)
        size = len(encode_request(1, request, "app")) - 4
        assert _ms(_exchange(broker, request, "app").throttle_time) == size - 10_000
        # user+client-id is more specific still
        _set_quota(broker, (("user", "ANONYMOUS"), ("client-id", "app")), producer_byte_rate=10**9)
        assert _ms(_exchange(broker, _produce_request(topic, 10_400), "app").throttle_time) == 0


def test_request_percentage_counts_handler_time() -> None:
    """Any handler time is over a quota of 1e-9 %; the request quota's throttle is bounded by one window."""
    with Broker(MANUAL) as broker:
        _set_quota(broker, (("client-id", "busy"),), request_percentage=1e-9)
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        assert _ms(_exchange(broker, metadata, "busy").throttle_time) == 1000
        assert _ms(_exchange(broker, metadata, "idle").throttle_time) == 0


def test_quotas_set_before_a_restart_throttle_its_first_request() -> None:
    """The quota enforcement is built at start when the data dir holds quotas (else at the first quota request)."""
    with Broker(MANUAL) as broker:
        _set_quota(broker, (("client-id", "busy"),), request_percentage=1e-9)
        broker.restart()
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        assert _ms(_exchange(broker, metadata, "busy").throttle_time) == 1000
        assert _ms(_exchange(broker, metadata, "idle").throttle_time) == 0


def test_request_percentage_throttles_error_responses_too() -> None:
    """A request answered with an error still took handler time (Kafka's sendErrorResponseMaybeThrottle)."""
    with Broker({**MANUAL, "minikafka.coordinator.load.delay.ms": "600000"}) as broker:
        _set_quota(broker, (("client-id", "busy"),), request_percentage=1e-9)
        answer = _exchange(broker, ListGroupsRequest(states_filter=()), "busy")
        assert answer.error_code == ErrorCode.coordinator_load_in_progress
        assert _ms(answer.throttle_time) == 1000


def _create(broker: Broker, name: str, partitions: int, *, version: int = 7) -> Any:
    if version == 7:
        request: Any = CreateTopicsRequest(topics=(CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
            timeout=timedelta(seconds=10), validate_only=False)
    else:
        request = CreateTopicsV5(topics=(CreatableTopicV5(
            name=name, num_partitions=partitions, replication_factor=1, assignments=(), configs=()),),
            timeout=timedelta(seconds=10), validate_only=False)
    return _exchange(broker, request, "mutator")


def test_controller_mutation_rate_is_a_strict_token_bucket() -> None:
    """1 partition/s: a bucket of 11 (11 windows of 1 s). From CreateTopics v6 a topic past the quota is
    refused with THROTTLING_QUOTA_EXCEEDED; v5 creates it and only throttles."""
    with Broker(MANUAL) as broker:
        _set_quota(broker, (("client-id", "mutator"),), controller_mutation_rate=1)
        first = _create(broker, unique_topic("m1"), 20)
        assert first.topics[0].error_code == ErrorCode.none  # the bucket was full; now at -9
        assert _ms(first.throttle_time) == 0
        refused = _create(broker, unique_topic("m2"), 1)
        assert (refused.topics[0].error_code, refused.topics[0].error_message) == (
            ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")
        assert _ms(refused.throttle_time) == 9000
        permissive = _create(broker, unique_topic("m3"), 1, version=5)
        assert permissive.topics[0].error_code == ErrorCode.none
        assert _ms(permissive.throttle_time) == 10_000
        broker.advance_clock(10_000)
        assert _create(broker, unique_topic("m4"), 1).topics[0].error_code == ErrorCode.none


# --- DescribeClientQuotas / AlterClientQuotas ---------------------------------------------------------------


def _configs(broker: Broker, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = configs_main(["--bootstrap-server", broker.bootstrap_servers, *args], out, err)
    return code, out.getvalue(), err.getvalue()


def test_alter_and_describe_survive_a_restart() -> None:
    with Broker() as broker:
        assert _configs(broker, "--alter", "--entity-type", "clients", "--entity-name", "app",
                        "--add-config", "producer_byte_rate=1048576,request_percentage=12.5")[0] == 0
        assert _configs(broker, "--alter", "--entity-type", "users", "--entity-name", "alice",
                        "--entity-type", "clients", "--entity-default",
                        "--add-config", "consumer_byte_rate=2048")[1] == \
            "Completed updating config for user-principal 'alice', the default client-id.\n"
        assert _configs(broker, "--alter", "--entity-type", "users", "--entity-default",
                        "--add-config", "controller_mutation_rate=10")[0] == 0
        code, _out, err = _configs(broker, "--alter", "--entity-type", "clients", "--entity-name", "app",
                                   "--add-config", "producer_byte_rate=1.5")
        assert code == 1 and "Configuration producer_byte_rate must be a Long value" in err
        broker.restart()
        assert _configs(broker, "--describe", "--entity-type", "clients")[1] == (
            "Quota configs for client-id 'app' are producer_byte_rate=1048576.0, request_percentage=12.5\n")
        assert _configs(broker, "--describe", "--entity-type", "users")[1] == (
            "Quota configs for the default user-principal are controller_mutation_rate=10.0\n")
        with AdminClient(broker.bootstrap_servers) as client:
            connection = client.any_broker()
            everything = describe_quotas(connection, [], strict=False)
            assert sorted(dict(entity).get("user") or "" for entity, _values in everything) == ["", "", "alice"]
            assert describe_quotas(connection, [("user", 0, "alice")], strict=False) == [
                ((("client-id", None), ("user", "alice")), {"consumer_byte_rate": 2048.0})]
            assert describe_quotas(connection, [("user", 0, "alice")], strict=True) == []
            with pytest.raises(AdminError, match=r"Entity type user cannot appear more than once in the filter\."):
                describe_quotas(connection, [("user", 2, None), ("user", 1, None)])
            with pytest.raises(AdminError, match="Unsupported entity type group"):
                describe_quotas(connection, [("group", 2, None)])
            alter_quotas(connection, (("client-id", "app"),), {}, ["producer_byte_rate", "request_percentage"])
            assert describe_quotas(connection, [("client-id", 0, "app")]) == []


# --- the docs' example ------------------------------------------------------------------------------------


def test_the_docs_example_runs() -> None:
    section = DOCS.read_text().split("## Client quotas", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    with Broker(SHORT_WINDOWS) as broker:
        example = code.group(1).replace("localhost:9092", broker.bootstrap_servers)
        exec(compile(example, str(DOCS), "exec"), {})  # our own docs' example, as a reader would run it


def test_acks_0_produce_over_its_quota_mutes_the_connection() -> None:
    """No response to carry the throttle time: Kafka still mutes the channel (its bandwidth quota)."""
    with Broker(MANUAL) as broker:
        topic = unique_topic("quota-acks0")
        create_topic(broker.bootstrap_servers, topic)
        _set_quota(broker, (("client-id", "fire-and-forget"),), producer_byte_rate=1000)
        request = _produce_request(topic, 10_400)
        fire = ProduceRequest(transactional_id=None, acks=0, timeout=request.timeout, topic_data=request.topic_data)
        size = len(encode_request(1, fire, "fire-and-forget")) - 4
        wire = Wire(broker)
        try:
            started = time.monotonic()
            wire.send(encode_request(1, fire, "fire-and-forget"))
            answer = _exchange(broker, MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                                       include_topic_authorized_operations=False),
                               "fire-and-forget", wire=wire)
            assert time.monotonic() - started >= (size - 10_000) / 1000
            assert answer.brokers
        finally:
            wire.close()


def test_the_quota_apis_need_cluster_configs_permissions() -> None:
    """With an authorizer and no ACLs: DescribeClientQuotas needs DESCRIBE_CONFIGS, AlterClientQuotas
    ALTER_CONFIGS on the cluster; refused, each as Kafka's getErrorResponse answers."""
    authorizer = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with Broker(authorizer) as broker, AdminClient(broker.bootstrap_servers) as client:
        connection = client.any_broker()
        with pytest.raises(AdminError, match="Cluster authorization failed"):
            describe_quotas(connection, [])
        body = connection.request(49, validate_only=False, entries=[
            {"entity": [{"entity_type": "client-id", "entity_name": "app"}],
             "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}]}])
        assert [(e.error_code, [(d.entity_type, d.entity_name) for d in e.entity]) for e in body.entries] == [
            (ErrorCode.cluster_authorization_failed, [("client-id", "app")])]


def test_a_user_quota_follows_the_sasl_principal() -> None:
    """alice's quota throttles alice's producer and not admin's, with the same client id (SASL/PLAIN); the
    quota is set over a second, unauthenticated listener."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    config = {"listeners": "SASL_PLAINTEXT://127.0.0.1:0,PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN",
              "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas}
    with Broker(config) as broker:
        plain = f"127.0.0.1:{broker.node_port(1, 'PLAINTEXT')}"
        create_topic(plain, topic := unique_topic("quota-sasl"))
        with AdminClient(plain) as client:
            alter_quotas(client.any_broker(), (("user", "alice"),), {"producer_byte_rate": 1000}, [])
        throttles: dict[str, list[int]] = {"alice": [], "admin": []}
        for user in ("alice", "admin"):
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                                 "sasl.mechanism": "PLAIN", "sasl.username": user,
                                 "sasl.password": f"{user}-secret", "client.id": "shared-client-id",
                                 "throttle_cb": lambda event, u=user: throttles[u].append(event.throttle_time)})
            producer.produce(topic, b"x" * 15_000)  # 15 kB over 10 s is 1.5 kB/s
            assert producer.flush(30) == 0
            producer.poll(0)  # the throttle callback is served here
        assert throttles["alice"] and max(throttles["alice"]) > 0
        assert not any(throttles["admin"])


def test_create_partitions_and_delete_topics_take_from_the_same_bucket() -> None:
    with Broker(MANUAL) as broker:
        names = [unique_topic(f"d{index}") for index in range(3)]
        for name in names:
            assert _create(broker, name, 4).topics[0].error_code == ErrorCode.none
        _set_quota(broker, (("client-id", "mutator"),), controller_mutation_rate=1)  # a full bucket: 11
        grown = _exchange(broker, CreatePartitionsRequest(topics=(CreatePartitionsTopic(
            name=names[0], count=16, assignments=None),), timeout=timedelta(seconds=10), validate_only=False),
            "mutator")
        assert grown.results[0].error_code == ErrorCode.none  # 12 new partitions: the bucket at -1
        deleted = _exchange(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name=names[1], topic_id=None),),
                                                        timeout=timedelta(seconds=10)), "mutator")
        assert (deleted.responses[0].error_code, deleted.responses[0].error_message) == (
            ErrorCode.throttling_quota_exceeded, "The throttling quota has been exceeded.")
        assert _ms(deleted.throttle_time) == 1000
        broker.advance_clock(1000)
        deleted = _exchange(broker, DeleteTopicsRequest(topics=(DeleteTopicState(name=names[1], topic_id=None),),
                                                        timeout=timedelta(seconds=10)), "mutator")
        assert deleted.responses[0].error_code == ErrorCode.none


@pytest.mark.parametrize("version", [4, 12])
def test_a_throttled_fetch_answers_no_partitions(version: int) -> None:
    """Kafka's getThrottledResponse: nothing fetched (and not counted), the throttle time set."""
    with Broker(MANUAL) as broker:
        topic = unique_topic("quota-fetch-wire")
        create_topic(broker.bootstrap_servers, topic)
        produce(broker.bootstrap_servers, topic, [b"x" * 5000])
        _set_quota(broker, (("client-id", "reader"),), consumer_byte_rate=100)
        fetch = build(request_schema(1, version), max_wait=timedelta(0), min_bytes=1, topics=[
            {"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20}]}])
        throttled = _exchange(broker, fetch, "reader")
        assert _ms(throttled.throttle_time) > 0 and throttled.responses == ()
        answered = _exchange(broker, fetch, "someone-else")
        assert _ms(answered.throttle_time) == 0 and len(answered.responses) == 1


def test_connection_creation_rate_of_an_ip() -> None:
    """1 connection/s over 11 windows of 1 s: the 11th connection in the same instant is 1.1/s, so it is
    closed unanswered after the (one window) throttle time; it is not counted, so others are not."""
    with Broker(MANUAL) as broker:
        _set_quota(broker, (("ip", "127.0.0.1"),), connection_creation_rate=1)
        metadata = MetadataRequest(topics=None, allow_auto_topic_creation=False,
                                   include_topic_authorized_operations=False)
        # Ten connections in the same instant are 1/s over the ten windows Kafka's rate spans at least.
        for _ in range(10):
            assert _exchange(broker, metadata, "c").brokers
        wire = Wire(broker)
        try:
            wire.send(encode_request(1, metadata, "c"))
            assert wire.is_closed()
        finally:
            wire.close()
        broker.advance_clock(11_000)  # every sample has expired
        assert _exchange(broker, metadata, "c").brokers
