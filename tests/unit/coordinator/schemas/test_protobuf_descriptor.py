"""The serialized (base64 ``FileDescriptorProto``) form of Protobuf schemas, as confluent-kafka's Python client uses it.

``ProtobufSerializer`` registers ``base64(file_descriptor.serialized_pb)`` for a schema and each file it imports,
and ``ProtobufDeserializer`` fetches schemas with ``format=serialized`` and builds message classes from them
(confluent_kafka/schema_registry/common/protobuf.py, ``_schema_to_str`` and ``_str_to_proto``).
"""

from __future__ import annotations

import base64

import pytest
from google.protobuf import api_pb2, descriptor_pb2, descriptor_pool, message_factory, struct_pb2, timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.protobuf import PROTOBUF_FORMAT, ProtobufSchema
from opentelemetry.proto.trace.v1 import trace_pb2


def as_registered(file_descriptor: object) -> str:
    """What confluent-kafka's serializer registers for a file."""
    return base64.standard_b64encode(file_descriptor.serialized_pb).decode("ascii")  # type: ignore[attr-defined]


def descriptor_of(schema: ProtobufSchema) -> descriptor_pb2.FileDescriptorProto:
    return descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.serialized()))


def original(file_descriptor: object) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto.FromString(file_descriptor.serialized_pb)  # type: ignore[attr-defined]
    proto.ClearField("name")
    proto.ClearField("source_code_info")
    return proto


@pytest.mark.parametrize("module", [struct_pb2, timestamp_pb2, api_pb2])
def test_a_registered_descriptor_round_trips_exactly(module: object) -> None:
    schema = PROTOBUF_FORMAT.parse(as_registered(module.DESCRIPTOR), {})  # type: ignore[attr-defined]
    assert descriptor_of(schema) == original(module.DESCRIPTOR)  # type: ignore[attr-defined]
    assert schema.canonical.startswith('syntax = "proto3";\npackage google.protobuf;\n')


def test_the_deserializer_builds_message_classes_from_the_serialized_forms() -> None:
    file = trace_pb2.DESCRIPTOR
    references = {dependency.name: as_registered(dependency) for dependency in file.dependencies}
    references.update({inner.name: as_registered(inner) for dependency in file.dependencies
                       for inner in dependency.dependencies})
    schema = PROTOBUF_FORMAT.parse(as_registered(file), references)
    pool = descriptor_pool.DescriptorPool()
    for name in ("opentelemetry/proto/common/v1/common.proto", "opentelemetry/proto/resource/v1/resource.proto"):
        reference = descriptor_of(PROTOBUF_FORMAT.parse(references[name], references))
        reference.name = name
        pool.Add(reference)
    main = descriptor_of(schema)
    main.name = "default"
    pool.Add(main)
    span_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("opentelemetry.proto.trace.v1.Span"))
    span = trace_pb2.Span(name="checkout", trace_id=b"\x01" * 16, kind=trace_pb2.Span.SPAN_KIND_SERVER)
    span.attributes.add(key="user").value.string_value = "ann"
    decoded = span_class.FromString(span.SerializeToString())
    assert (decoded.name, decoded.kind, decoded.attributes[0].value.string_value) == ("checkout", 2, "ann")


def test_proto_text_compiles_to_a_usable_descriptor() -> None:
    schema = PROTOBUF_FORMAT.parse(
        'syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
        "message Order {\n  string id = 1;\n  map<string, int64> counts = 2;\n"
        "  oneof payment { string card = 3; Wallet wallet = 4; }\n  optional int32 priority = 5;\n"
        "  google.protobuf.Timestamp at = 6;\n  Status status = 7;\n  repeated Item items = 8;\n"
        "  message Item { string sku = 1; }\n  enum Status { NEW = 0; PAID = 1; }\n}\n"
        "message Wallet { bytes token = 1; }\n", {})
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    compiled = descriptor_of(schema)
    compiled.name = "order.proto"
    pool.Add(compiled)
    order_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))
    order = order_class(id="o-1", card="4242", priority=0, status=1)
    order.counts["apples"] = 3
    order.items.add(sku="A1")
    order.at.seconds = 1_700_000_000
    decoded = order_class.FromString(order.SerializeToString())
    assert decoded.counts["apples"] == 3 and decoded.WhichOneof("payment") == "card"
    assert decoded.HasField("priority") and decoded.items[0].sku == "A1" and decoded.at.seconds == 1_700_000_000
    # The text printed back from the descriptor is the same schema.
    again = PROTOBUF_FORMAT.parse(schema.serialized(), {})
    assert again.normalized() == schema.normalized()
    assert again.incompatibilities(schema) == [] and schema.incompatibilities(again) == []


def test_proto2_features_compile() -> None:
    schema = PROTOBUF_FORMAT.parse(
        'syntax = "proto2";\nmessage M {\n  required int32 a = 1 [default = 7];\n  optional string s = 2 '
        '[default = "x", deprecated = true];\n  repeated int32 packed = 3 [packed = true];\n'
        "  optional group G = 4 { optional int32 g = 1; }\n  reserved 10 to 12, 20 to max;\n"
        "  extensions 100 to 199;\n}\n", {})
    pool = descriptor_pool.DescriptorPool()
    compiled = descriptor_of(schema)
    compiled.name = "m.proto"
    pool.Add(compiled)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName("M"))()
    assert message.a == 7 and message.s == "x"
    assert PROTOBUF_FORMAT.parse(schema.serialized(), {}).normalized() == schema.normalized()


@pytest.mark.parametrize("text", ["AAAA", "not base64 but letters only", "////", "CgZ4LnByb3RvIgN4"])
def test_malformed_serialized_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema, match=r"neither \.proto text nor a serialized FileDescriptorProto"):
        PROTOBUF_FORMAT.parse(text, {})


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_descriptors(data: st.DataObject) -> None:
    raw = bytearray(struct_pb2.DESCRIPTOR.serialized_pb)
    for _ in range(data.draw(st.integers(1, 4))):
        index = data.draw(st.integers(0, len(raw) - 1))
        raw[index] = data.draw(st.integers(0, 255))
    try:
        schema = PROTOBUF_FORMAT.parse(base64.b64encode(bytes(raw)).decode(), {})
    except InvalidSchema:
        return
    assert schema.serialized()


class RecordingRegistry:
    """Stands in for confluent-kafka's SchemaRegistryClient: keeps what the serializer registers."""

    def __init__(self) -> None:
        self.registered: dict[str, object] = {}

    def register_schema(self, subject: str, schema: object, normalize_schemas: bool = False) -> int:
        self.registered[subject] = schema
        return len(self.registered)

    def register_schema_full_response(self, subject: str, schema: object, normalize_schemas: bool = False) -> object:
        return type("Registered", (), {"schema_id": self.register_schema(subject, schema), "guid": None})()

    def lookup_schema(self, subject: str, schema: object, normalize_schemas: bool = False, **_: object) -> object:
        return type("Registered", (), {"version": 1, "schema_id": 1, "guid": None})()

    def get_associations_by_resource_name(self, **_: object) -> object:
        # confluent-kafka 2.16's default subject name strategy asks for the topic's associations first and
        # falls back to topic naming on a 404, which is what a registry without associations answers.
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        raise SchemaRegistryError(404, 40401, "Not found")


def test_what_confluent_kafkas_protobuf_serializer_registers_parses() -> None:
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    registry = RecordingRegistry()
    serializer = ProtobufSerializer(trace_pb2.Span, registry, {"use.deprecated.format": False})  # type: ignore[arg-type]
    serializer(trace_pb2.Span(name="checkout"), SerializationContext("spans", MessageField.VALUE))
    texts = {subject: schema.schema_str for subject, schema in registry.registered.items()}  # type: ignore[attr-defined]
    assert set(texts) == {"spans-value", "opentelemetry/proto/common/v1/common.proto",
                          "opentelemetry/proto/resource/v1/resource.proto"}
    # References name the imported file and the subject it was registered under (here the same).
    schema = PROTOBUF_FORMAT.parse(texts["spans-value"], texts)
    assert "message Span {" in schema.canonical
    assert "import \"opentelemetry/proto/common/v1/common.proto\";" in schema.canonical
