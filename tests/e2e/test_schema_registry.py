"""The schema registry end to end: confluent-kafka's SchemaRegistryClient, AvroSerializer and
AvroDeserializer through the broker, subject name strategies, auto registration on and off,
use.latest.version, an incompatible change refused, the state in `_schemas` across restarts and kill -9."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import (
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from minikafka.testing import Broker

from tests.support.waiting import poll_until

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"], "default": None}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"}, {"name": "favorite_number", "type": ["null", "int"], "default": None},
    {"name": "favorite_color", "type": "string", "default": "green"}]})
USER_NO_DEFAULT = json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": [
    {"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})


def _consume(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    messages: list[Any] = []
    try:
        def got_all() -> bool:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                messages.append(message)
            return len(messages) >= count

        poll_until(got_all, timeout=30, message=f"{count} messages from {topic}")
    finally:
        consumer.close()
    return messages


def _produce(bootstrap: str, topic: str, values: list[bytes | None]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(20) == 0


def test_avro_round_trip_through_the_broker(minikafka: Broker, schema_registry_url: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    topic = "users"
    serializer = AvroSerializer(client, USER_V1)
    context = SerializationContext(topic, MessageField.VALUE)
    users = [{"name": "Alyssa", "favorite_number": 256}, {"name": "Ben", "favorite_number": None}]
    _produce(minikafka.bootstrap_servers, topic, [serializer(user, context) for user in users])

    # A fresh client knows no schema: the deserializer looks the writer's schema up by the id in each record.
    reader = AvroDeserializer(SchemaRegistryClient({"url": schema_registry_url}))
    messages = _consume(minikafka.bootstrap_servers, topic, 2)
    assert [reader(m.value(), context) for m in messages] == users
    schema_id = int.from_bytes(messages[0].value()[1:5], "big")
    assert messages[0].value()[0] == 0  # Confluent's wire format: magic byte, then the id
    assert client.get_subjects() == ["users-value"]
    assert client.get_schema(schema_id).schema_type == "AVRO"
    assert client.get_latest_version("users-value").schema_id == schema_id

    # Any Kafka client can read the registry's state: the SCHEMA record of users-value version 1.
    records = _consume(minikafka.bootstrap_servers, "_schemas", 1)
    key, value = json.loads(records[0].key()), json.loads(records[0].value())
    assert key == {"keytype": "SCHEMA", "subject": "users-value", "version": 1, "magic": 1}
    assert (value["subject"], value["version"], value["id"], value["deleted"]) == ("users-value", 1, schema_id, False)


@pytest.mark.parametrize(("strategy", "expected"), [
    (topic_subject_name_strategy, "orders-value"),
    (record_subject_name_strategy, "com.example.User"),
    (topic_record_subject_name_strategy, "orders-com.example.User"),
])
def test_subject_name_strategies(schema_registry_url: str, strategy: Any, expected: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    serializer = AvroSerializer(client, USER_V1, conf={"subject.name.strategy": strategy})
    serializer({"name": "a", "favorite_number": 1}, SerializationContext("orders", MessageField.VALUE))
    assert client.get_subjects() == [expected]


def test_auto_register_off_and_use_latest_version(schema_registry_url: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    context = SerializationContext("t", MessageField.VALUE)
    lookup_only = AvroSerializer(client, USER_V1, conf={"auto.register.schemas": False})
    with pytest.raises(SchemaRegistryError) as unregistered:
        lookup_only({"name": "a", "favorite_number": None}, context)
    assert (unregistered.value.http_status_code, unregistered.value.error_code) == (404, 40401)

    v1 = client.register_schema("t-value", Schema(USER_V1, "AVRO"))
    assert lookup_only({"name": "a", "favorite_number": None}, context)[1:5] == v1.to_bytes(4, "big")

    v2 = client.register_schema("t-value", Schema(USER_V2, "AVRO"))
    latest = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), USER_V1,
                            conf={"auto.register.schemas": False, "use.latest.version": True})
    encoded = latest({"name": "a", "favorite_number": None, "favorite_color": "blue"}, context)
    assert int.from_bytes(encoded[1:5], "big") == v2
    decoded = AvroDeserializer(SchemaRegistryClient({"url": schema_registry_url}))(encoded, context)
    assert decoded == {"name": "a", "favorite_number": None, "favorite_color": "blue"}


def test_an_incompatible_change_is_refused_with_409_and_the_verbose_messages(schema_registry_url: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    client.register_schema("s-value", Schema(USER_V1, "AVRO"))
    assert client.test_compatibility("s-value", Schema(USER_V2, "AVRO")) is True
    assert client.test_compatibility("s-value", Schema(USER_NO_DEFAULT, "AVRO")) is False
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("s-value", Schema(USER_NO_DEFAULT, "AVRO"))
    assert (refused.value.http_status_code, refused.value.error_code) == (409, 409)
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.value.error_message
    assert "{oldSchemaVersion: 1}" in refused.value.error_message
    serializer = AvroSerializer(client, USER_NO_DEFAULT)
    with pytest.raises(SchemaRegistryError):
        serializer({"name": "a", "age": 3}, SerializationContext("s", MessageField.VALUE))
    assert client.set_compatibility("s-value", "NONE") == {"compatibility": "NONE"}
    assert client.get_compatibility("s-value") == "NONE"
    assert client.register_schema("s-value", Schema(USER_NO_DEFAULT, "AVRO")) > 0


def test_references_deletes_and_modes(schema_registry_url: str) -> None:
    client = SchemaRegistryClient({"url": schema_registry_url})
    user_id = client.register_schema("user", Schema(USER_V1, "AVRO"))
    order = json.dumps({"type": "record", "name": "Order", "namespace": "com.example", "fields": [
        {"name": "buyer", "type": "com.example.User"}]})
    order_schema = Schema(order, "AVRO", [SchemaReference("com.example.User", "user", 1)])
    order_id = client.register_schema("order-value", order_schema)
    assert client.get_referenced_by("user", 1) == [order_id]
    with pytest.raises(SchemaRegistryError) as referenced:
        client.delete_subject("user")
    assert referenced.value.error_code == 42206
    serializer = AvroSerializer(client, order_schema, conf={"auto.register.schemas": False, "use.latest.version": True})
    context = SerializationContext("order", MessageField.VALUE)
    encoded = serializer({"buyer": {"name": "x", "favorite_number": 7}}, context)
    assert AvroDeserializer(SchemaRegistryClient({"url": schema_registry_url}))(encoded, context) == {
        "buyer": {"name": "x", "favorite_number": 7}}

    assert client.delete_version("order-value", 1) == 1
    assert client.get_subjects() == ["user"]
    assert client.delete_subject("order-value", permanent=True) == [1]
    assert client.delete_subject("user") == [1]
    assert client.get_schema(user_id).schema_str == USER_V1  # soft-deleted schemas are still found by id
    assert client.delete_subject("user", permanent=True) == [1]
    with pytest.raises(SchemaRegistryError) as gone:
        SchemaRegistryClient({"url": schema_registry_url}).get_schema(user_id)
    assert gone.value.error_code == 40403

    assert client.update_global_mode("IMPORT") == "IMPORT"
    registered = client._rest_client.post("subjects/imported/versions",
                                          body={"schema": USER_V1, "id": 1000, "version": 5})
    assert registered == {"id": 1000}
    assert client.get_version("imported", 5).schema_id == 1000
    assert client.update_global_mode("READONLY") == "READONLY"
    with pytest.raises(SchemaRegistryError) as readonly:
        client.register_schema("other", Schema(USER_V2, "AVRO"))
    assert readonly.value.error_code == 42205
    client.update_global_mode("READWRITE")


def test_state_survives_restart_and_kill_9(tmp_path: Any) -> None:
    with Broker(mode="process", schema_registry=True) as broker:
        url = broker.schema_registry_url
        assert url is not None
        client = SchemaRegistryClient({"url": url})
        first = client.register_schema("a-value", Schema(USER_V1, "AVRO"))
        second = client.register_schema("a-value", Schema(USER_V2, "AVRO"))
        client.set_compatibility("a-value", "FULL")
        client.delete_version("a-value", 1)
        broker.restart(hard=True)  # kill -9
        assert broker.schema_registry_url == url
        after = SchemaRegistryClient({"url": url})
        assert after.get_versions("a-value") == [2]
        assert after.get_compatibility("a-value") == "FULL"
        assert after.get_schema(first).schema_str == USER_V1
        assert after.register_schema("b-value", Schema(USER_V2, "AVRO")) == second
        broker.restart()
        assert SchemaRegistryClient({"url": url}).get_subjects() == ["a-value", "b-value"]


JS_DIR = Path(__file__).parent / "js"
NODE = shutil.which("node")


@pytest.mark.kafkajs
@pytest.mark.skipif(NODE is None or not (JS_DIR / "node_modules" / "@kafkajs" / "confluent-schema-registry").exists(),
                    reason="node or @kafkajs/confluent-schema-registry is not installed (make js)")
def test_kafkajs_with_its_confluent_schema_registry_client(minikafka: Broker, schema_registry_url: str) -> None:
    done = subprocess.run([NODE or "node", str(JS_DIR / "schema_registry.js"), minikafka.bootstrap_servers,
                           schema_registry_url, "kjs-users"], capture_output=True, text=True, timeout=90, check=False)
    result = json.loads(done.stdout or "{}")
    assert done.returncode == 0 and "error" not in result, (result, done.stderr)
    assert result["decoded"] == [{"name": "Alyssa", "age": 30}, {"name": "Ben", "age": 7}]
    assert result["latestId"] == result["id"]
    assert result["refused"]["status"] == 409
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in result["refused"]["message"]
