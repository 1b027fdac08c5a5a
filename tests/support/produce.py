"""One way to write records with a real client and wait until each has its delivery report."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from confluent_kafka import KafkaError, Producer

Client = Literal["confluent", "aiokafka", "kafka-python"]
Partitioner = int | Sequence[int] | None
# confluent-kafka settings: each record goes out at once instead of waiting to fill a batch.
SEND_AT_ONCE = {"linger.ms": 0}
# ... and each in a batch of its own.
ONE_PER_BATCH = {**SEND_AT_ONCE, "batch.num.messages": 1}


def numbered(count: int, prefix: str = "v") -> list[bytes]:
    """`count` values (or keys) spelled prefix0, prefix1, ..."""
    return [f"{prefix}{index}".encode() for index in range(count)]


def produce(bootstrap: str, topic: str, values: Iterable[bytes | None], *, keys: Sequence[bytes | None] | None = None,
            partition: Partitioner = None, timestamps: Sequence[int] | None = None,
            headers: list[tuple[str, bytes]] | None = None, flush_each: bool = False, timeout: float = 15.0,
            client: Client = "confluent", **config: Any) -> list[KafkaError]:
    """Send `values` to `topic` and return once every record has its delivery report; returns the errors
    those reports carried (confluent-kafka's; the other clients raise theirs).

    `keys[i]`, `timestamps[i]` and `partition[i]` go with `values[i]` (one `partition` number: every record
    there; None: the client's partitioner). `config` is the client's own configuration (confluent-kafka's
    dotted keys, aiokafka's and kafka-python's keyword arguments). `flush_each` waits for each record's
    acknowledgement before the next is sent (one Produce request each); aiokafka and kafka-python always do.
    """
    values = list(values)
    if client == "aiokafka":
        _produce_aiokafka(bootstrap, topic, values, config)
        return []
    if client == "kafka-python":
        _produce_kafka_python(bootstrap, topic, values, timeout, config)
        return []
    producer = Producer({"bootstrap.servers": bootstrap, **config})
    errors: list[KafkaError] = []

    def report(error: KafkaError | None, _message: object) -> None:
        if error is not None:
            errors.append(error)

    for index, value in enumerate(values):
        extra: dict[str, Any] = {}
        if keys is not None:
            extra["key"] = keys[index]
        if partition is not None:
            extra["partition"] = partition if isinstance(partition, int) else partition[index]
        if timestamps is not None:
            extra["timestamp"] = timestamps[index]
        if headers is not None:
            extra["headers"] = headers
        producer.produce(topic, value, on_delivery=report, **extra)
        if flush_each:
            assert producer.flush(timeout) == 0
        producer.poll(0)
    assert producer.flush(timeout) == 0, "records left unacknowledged"
    return errors


def _produce_aiokafka(bootstrap: str, topic: str, values: list[bytes | None], config: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaProducer

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, **config)
        await producer.start()
        try:
            for value in values:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()

    asyncio.run(run())


def _produce_kafka_python(bootstrap: str, topic: str, values: list[bytes | None], timeout: float,
                          config: dict[str, Any]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, **config)
    try:
        for value in values:
            producer.send(topic, value).get(timeout=timeout)
    finally:
        producer.close(timeout=timeout)


def produce_numbers(bootstrap: str, topic: str, numbers: Iterable[int], partitions: int, *,
                    timeout: float = 15.0) -> None:
    """Each number as its decimal text, to partition `number % partitions`: what was read says what was sent."""
    numbers = list(numbers)
    produce(bootstrap, topic, [str(number).encode() for number in numbers],
            partition=[number % partitions for number in numbers], timeout=timeout)
