"""JSON Schema and Protobuf through the registry and the broker with confluent-kafka's serializers. The formats
come from coordinator/schemas/json_schema.py and protobuf.py once they are in FORMATS; until then these
tests are skipped."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext
from minikafka.coordinator.schemas.formats import FORMATS
from minikafka.testing import Broker

from tests.support.waiting import poll_until


def _round_trip(broker: Broker, topic: str, values: list[bytes]) -> list[bytes]:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 1})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got: list[bytes] = []

    def all_back() -> bool:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(message.value())
        return len(got) >= len(values)

    try:
        poll_until(all_back, timeout=30, message=f"{len(values)} records from {topic}")
    finally:
        consumer.close()
    return got


@pytest.mark.skipif("JSON" not in FORMATS, reason="the JSON Schema format is not in FORMATS yet")
def test_json_schema_serializer_through_the_broker(minikafka: Broker, schema_registry_url: str) -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer

    client = SchemaRegistryClient({"url": schema_registry_url})
    schema = json.dumps({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}})
    context = SerializationContext("people", MessageField.VALUE)
    encoded = [JSONSerializer(schema, client)(person, context) for person in ({"name": "a", "age": 1}, {"name": "b"})]
    reader = JSONDeserializer(None, schema_registry_client=SchemaRegistryClient({"url": schema_registry_url}))
    decoded: list[Any] = [reader(value, context) for value in _round_trip(minikafka, "people", encoded)]
    assert decoded == [{"name": "a", "age": 1}, {"name": "b"}]
    assert client.get_latest_version("people-value").schema.schema_type == "JSON"
    changed = json.dumps({"type": "object", "properties": {"name": {"type": "integer"}}})
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("people-value", Schema(changed, "JSON"))
    assert refused.value.http_status_code == 409


@pytest.mark.skipif("PROTOBUF" not in FORMATS, reason="the Protobuf format is not in FORMATS yet")
def test_protobuf_serializer_through_the_broker(minikafka: Broker, schema_registry_url: str) -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
    from google.protobuf import timestamp_pb2

    client = SchemaRegistryClient({"url": schema_registry_url})
    context = SerializationContext("times", MessageField.VALUE)
    serializer = ProtobufSerializer(timestamp_pb2.Timestamp, client, {"use.deprecated.format": False})
    encoded = [serializer(timestamp_pb2.Timestamp(seconds=seconds), context) for seconds in (5, 7)]
    reader = ProtobufDeserializer(timestamp_pb2.Timestamp, {"use.deprecated.format": False})
    assert [reader(value, context).seconds for value in _round_trip(minikafka, "times", encoded)] == [5, 7]
    assert client.get_latest_version("times-value").schema.schema_type == "PROTOBUF"
    assert client.get_schema_types()[:2] == ["JSON", "PROTOBUF"]
