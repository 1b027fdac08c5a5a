"""Idempotent producers through a fault proxy and broker restarts: every message exactly once, in order."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest
from aiokafka import AIOKafkaProducer
from confluent_kafka import Producer
from kio.schema.describe_producers.v0.request import DescribeProducersRequest, TopicRequest
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic
from tests.support.names import unique_topic
from tests.support.waiting import poll_until
from tests.support.wire import Wire

from .fault_proxy import FaultProxy

MESSAGES = 100_000
PARTITIONS = 3


@pytest.fixture
def proxied(broker_factory) -> tuple[Broker, FaultProxy]:
    """A broker that advertises a fault proxy's address, so clients talk through the proxy only."""
    proxy = FaultProxy(0, drop_produce=lambda n: n % 37 == 0)
    broker = broker_factory(**{"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"})
    proxy.upstream = ("127.0.0.1", broker.port)
    yield broker, proxy
    proxy.close()


def assert_exactly_once_in_order(broker: Broker, topic: str, total: int) -> None:
    # Read straight from the broker (its own port), not through the proxy.
    records = consume(f"127.0.0.1:{broker.port}", topic, total, partitions=tuple(range(PARTITIONS)), timeout=60)
    numbers = [int(r.value) for r in records]  # type: ignore[arg-type]
    assert len(numbers) == total, f"{len(numbers)} records for {total} messages"
    assert sorted(numbers) == list(range(total)), "every message exactly once"
    for partition in range(PARTITIONS):
        in_partition = [int(r.value) for r in records if r.partition == partition]  # type: ignore[arg-type]
        assert in_partition == sorted(in_partition), f"order kept in partition {partition}"


def confluent_idempotent(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
                     "batch.num.messages": 500, "message.timeout.ms": 120_000,
                     "queue.buffering.max.messages": 200_000})


def produce_numbered(producer: Producer, topic: str, numbers: range, failures: list,
                     on_delivered: Callable[[object, object], None] | None = None) -> None:
    def report(err: object, _msg: object) -> None:
        if err is not None:
            failures.append(err)

    for number in numbers:
        while True:
            try:
                producer.produce(topic, str(number).encode(), partition=number % PARTITIONS,
                                 on_delivery=on_delivered or report)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)


def test_confluent_idempotent_through_dropped_responses(proxied: tuple[Broker, FaultProxy]) -> None:
    broker, proxy = proxied
    topic = unique_topic("idemproxy")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    producer = confluent_idempotent(f"127.0.0.1:{proxy.port}")
    failures: list = []
    produce_numbered(producer, topic, range(MESSAGES), failures)
    assert producer.flush(120) == 0
    assert not failures, failures[:3]
    assert proxy.dropped > 0, "the proxy must actually have dropped responses"
    assert_exactly_once_in_order(broker, topic, MESSAGES)


async def test_aiokafka_idempotent_through_dropped_responses(proxied: tuple[Broker, FaultProxy]) -> None:
    broker, proxy = proxied
    proxy.drop_produce = lambda n: n % 5 == 0  # aiokafka packs more into each request
    topic = unique_topic("aioidem")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    producer = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_idempotence=True,
                                linger_ms=5, request_timeout_ms=10_000, retry_backoff_ms=50)
    await producer.start()
    try:
        total = MESSAGES
        for start in range(0, total, 5000):
            futures = [await producer.send(topic, str(n).encode(), partition=n % PARTITIONS)
                       for n in range(start, min(start + 5000, total))]
            await asyncio.gather(*futures)
    finally:
        await producer.stop()
    assert proxy.dropped > 0
    assert_exactly_once_in_order(broker, topic, total)


@pytest.mark.parametrize("hard", [True, False], ids=["kill-9", "clean"])
def test_confluent_idempotent_across_broker_restart(broker: Broker, hard: bool) -> None:
    topic = unique_topic("idemrestart")
    create_topic(broker.bootstrap_servers, topic, PARTITIONS)
    producer = confluent_idempotent(broker.bootstrap_servers)
    failures: list = []
    delivered = [0]

    def count(err: object, _msg: object) -> None:
        if err is None:
            delivered[0] += 1
        else:
            failures.append(err)

    restarter = threading.Thread(target=lambda: (
        poll_until(lambda: delivered[0] >= MESSAGES // 3, timeout=60, message="deliveries before restart"),
        broker.restart(hard=hard)))
    restarter.start()
    produce_numbered(producer, topic, range(MESSAGES), failures, on_delivered=count)
    for _ in range(1200):
        if not restarter.is_alive():
            break
        producer.poll(0.1)
    restarter.join(5)
    assert producer.flush(120) == 0
    assert not failures, failures[:3]
    assert_exactly_once_in_order(broker, topic, MESSAGES)
    assert list((broker.data_dir / f"{topic}-0").glob("*.snapshot")), "a producer snapshot was written"
    producers = describe_producers(broker, topic, 0)
    assert len(producers) == 1
    assert producers[0].producer_epoch == 0
    assert producers[0].last_sequence == len(range(0, MESSAGES, PARTITIONS)) - 1
    assert producers[0].current_txn_start_offset == -1


def describe_producers(broker: Broker, topic: str, partition: int) -> tuple:
    """DescribeProducers over the raw protocol (confluent-kafka's Python admin does not expose it)."""
    request = DescribeProducersRequest(topics=(TopicRequest(name=topic, partition_indexes=(partition,)),))
    wire = Wire(broker)
    try:
        wire.send(encode_request(1, request))
        _corr, response = decode_response(wire.receive(), 61, 0)
    finally:
        wire.close()
    [result] = response.topics[0].partitions
    assert result.error_code == 0
    return result.active_producers
