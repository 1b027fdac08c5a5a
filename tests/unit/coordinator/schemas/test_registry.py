"""The registry model over a real log: ids, versions, deletes, configs, modes, and a replay that agrees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from minikafka.coordinator.schemas.compatibility import CompatibilityLevel
from minikafka.coordinator.schemas.records import SCHEMAS_TOPIC, Reference
from minikafka.coordinator.schemas.registry import SchemaRegistry
from minikafka.coordinator.schemas.registry_errors import (
    IncompatibleSchema,
    InvalidSchemaError,
    InvalidVersion,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotSoftDeleted,
)
from minikafka.protocol.records import decode_batch, iter_whole_batches
from minikafka.storage.clock import ManualClock
from minikafka.storage.log import LogConfig
from minikafka.storage.manager import LogManager


def _record(*fields: tuple[str, str] | tuple[str, str, object]) -> str:
    out = []
    for spec in fields:
        entry: dict[str, object] = {"name": spec[0], "type": spec[1]}
        if len(spec) == 3:
            entry["default"] = spec[2]
        out.append(entry)
    return json.dumps({"type": "record", "name": "User", "namespace": "com.example", "fields": out})


V1 = _record(("name", "string"))
V2 = _record(("name", "string"), ("age", "int", 0))
V2_NO_DEFAULT = _record(("name", "string"), ("age", "int"))


class Node:
    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.clock = ManualClock(1_000)
        self.logs = LogManager(data_dir, LogConfig(), self.clock)
        self.logs.load()
        self.registry = SchemaRegistry(self.logs, self.clock.now_ms)
        self.registry.load()

    def restart(self) -> Node:
        self.logs.close(clean=True)
        return Node(self.data_dir)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path)


def test_ids_are_global_and_stable(node: Node) -> None:
    registry = node.registry
    first = registry.register("a-value", "AVRO", V1)
    assert (first.id, first.version) == (1, 1)
    spaced = json.dumps(json.loads(V1), indent=4)
    assert registry.register("a-value", "AVRO", spaced).id == 1
    assert registry.register("b-value", "AVRO", V1).id == 1
    assert registry.register("a-value", "AVRO", V2).id == 2
    assert registry.versions("a-value") == [1, 2]
    assert registry.version("a-value", "latest").id == 2
    assert registry.versions_of_id(1) == [("a-value", 1), ("b-value", 1)]
    assert registry.lookup("a-value", "AVRO", spaced).version == 1
    with pytest.raises(SchemaNotFound):
        registry.lookup("a-value", "AVRO", _record(("other", "string")))


def test_an_incompatible_schema_is_refused_with_the_verbose_messages(node: Node) -> None:
    node.registry.register("s", "AVRO", V1)
    with pytest.raises(IncompatibleSchema) as refused:
        node.registry.register("s", "AVRO", V2_NO_DEFAULT)
    assert refused.value.messages[0].startswith("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE'")
    assert "{oldSchemaVersion: 1}" in refused.value.messages
    assert "{compatibility: 'BACKWARD'}" in refused.value.messages
    node.registry.set_config("s", "NONE")
    assert node.registry.register("s", "AVRO", V2_NO_DEFAULT).version == 2


def test_transitive_levels_check_every_version(node: Node) -> None:
    registry = node.registry
    registry.set_config(None, "FORWARD")
    registry.register("s", "AVRO", _record(("a", "string"), ("b", "string")))
    registry.register("s", "AVRO", _record(("a", "string"), ("b", "string"), ("c", "int")))
    dropped_b = _record(("a", "string"), ("c", "int"))
    assert registry.check_compatibility("s", "latest", "AVRO", dropped_b, ()) != []
    registry.set_config("s", "FORWARD_TRANSITIVE")
    assert registry.check_compatibility("s", None, "AVRO", _record(("a", "string"), ("b", "string"), ("c", "int"),
                                                                    ("d", "int")), ()) == []


def test_soft_then_permanent_deletes(node: Node) -> None:
    registry = node.registry
    registry.register("s", "AVRO", V1)
    registry.register("s", "AVRO", V2)
    with pytest.raises(VersionNotSoftDeleted):
        registry.delete_version("s", 1, permanent=True)
    assert registry.delete_version("s", 1) == 1
    assert registry.versions("s") == [2]
    assert registry.versions("s", deleted=True) == [1, 2]
    with pytest.raises(SubjectNotSoftDeleted):
        registry.delete_subject("s", permanent=True)
    assert registry.delete_subject("s") == [2]
    assert registry.subjects() == [] and registry.subjects(deleted=True) == ["s"]
    with pytest.raises(SubjectSoftDeleted):
        registry.delete_subject("s")
    assert registry.schema_by_id(1).schema == V1  # a soft-deleted schema is still found by id
    assert registry.delete_subject("s", permanent=True) == [1, 2]
    with pytest.raises(SchemaNotFound):
        registry.schema_by_id(1)
    again = registry.register("s", "AVRO", V1)
    assert again.version == 1


def test_references(node: Node) -> None:
    registry = node.registry
    registry.register("user", "AVRO", V1)
    order = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "user", "type": "com.example.User"}]})
    reference = Reference("com.example.User", "user", 1)
    registered = registry.register("order", "AVRO", order, (reference,))
    assert registry.referenced_by("user", 1) == [registered.id]
    with pytest.raises(ReferenceExists):
        registry.delete_subject("user")
    with pytest.raises(InvalidSchemaError):
        registry.register("order2", "AVRO", order)  # the type is unknown without its reference


def test_configs_and_modes(node: Node) -> None:
    registry = node.registry
    assert registry.config(None) is CompatibilityLevel.BACKWARD
    with pytest.raises(SubjectConfigNotFound):
        registry.config("s")
    assert registry.config("s", default_to_global=True) is CompatibilityLevel.BACKWARD
    registry.set_mode(None, "READONLY")
    with pytest.raises(OperationNotPermitted):
        registry.register("s", "AVRO", V1)
    registry.set_mode(None, "IMPORT")
    imported = registry.register("s", "AVRO", V1, schema_id=42, version=7)
    assert (imported.id, imported.version) == (42, 7)
    registry.set_mode(None, "READWRITE")
    assert registry.register("t", "AVRO", V2).id == 43
    with pytest.raises(InvalidVersion):
        registry.version("s", "0")
    with pytest.raises(SubjectNotFound):
        registry.versions("nope")


def test_state_survives_a_restart_and_any_client_can_read_it(node: Node) -> None:
    registry = node.registry
    registry.register("a", "AVRO", V1)
    registry.register("a", "AVRO", V2)
    registry.register("b", "AVRO", V1)
    registry.delete_version("a", 1)
    registry.set_config("a", "FULL")
    registry.set_mode("b", "READONLY")
    registry.register("c", "AVRO", V1)
    registry.delete_subject("c")
    before = registry.summary()
    restarted = node.restart()
    assert restarted.registry.summary() == before
    assert restarted.registry.register("d", "AVRO", _record(("x", "long"))).id == 3
    log = restarted.logs.partition(SCHEMAS_TOPIC, 0)
    assert log is not None
    chunk = bytes(log.read(0, 1 << 20).records)  # type: ignore[arg-type]
    keys = [json.loads(r.key) for pos, _h in iter_whole_batches(chunk) for r in decode_batch(chunk, pos).records]
    assert {"keytype": "SCHEMA", "subject": "a", "version": 1, "magic": 1} in keys
    assert {"keytype": "CONFIG", "subject": "a", "magic": 0} in keys
    assert {"keytype": "DELETE_SUBJECT", "subject": "c", "magic": 0} in keys


def test_reset_forgets_everything_but_the_ids(node: Node) -> None:
    node.registry.register("a", "AVRO", V1)
    node.registry.set_config(None, "NONE")
    node.registry.reset()
    assert node.registry.subjects(deleted=True) == []
    assert node.registry.config(None) is CompatibilityLevel.BACKWARD
    assert node.registry.register("a", "AVRO", V1).id == 2
    restarted = node.restart()
    assert restarted.registry.subjects() == ["a"]


def test_records_other_clients_wrote_are_skipped_at_start(node: Node) -> None:
    from minikafka.protocol.records import build_one_record_batch

    node.registry.register("a", "AVRO", V1)
    log = node.logs.partition(SCHEMAS_TOPIC, 0)
    assert log is not None
    for key, value in [(b"not json", b"{}"), (b'{"keytype": "SCHEMA", "subject": "x", "version": "one"}', b"{}"),
                       (b'{"keytype": "SCHEMA", "subject": "x", "version": 1}', b'{"subject": "x"}'),
                       (b'{"keytype": "CONFIG", "subject": null}', b'{"compatibilityLevel": "SIDEWAYS"}'),
                       (b'{"keytype": "NOOP", "magic": 0}', None), (b"[1]", b"[2]")]:
        batch, header = build_one_record_batch(key, value, 1)
        log.append(batch, 1, [(0, header)])
    restarted = node.restart()
    assert restarted.registry.subjects() == ["a"]
    assert restarted.registry.config(None) is CompatibilityLevel.BACKWARD


def test_normalize_registers_the_normalized_text(node: Node) -> None:
    spaced = json.dumps(json.loads(V1), indent=2)
    stored = node.registry.register("n", "AVRO", spaced, normalize=True)
    assert stored.schema == '{"type":"record","name":"com.example.User","fields":[{"name":"name","type":"string"}]}'
    assert node.registry.lookup("n", "AVRO", V1, normalize=True).id == stored.id


class _SortedJson:
    """A stand-in format with the shape the JSON and PROTOBUF modules plug into FORMATS."""

    name = "SORTED_JSON"

    def parse(self, text: str, references: dict[str, str]) -> _SortedJsonSchema:
        try:
            return _SortedJsonSchema(json.dumps(json.loads(text), sort_keys=True))
        except ValueError as exc:
            from minikafka.coordinator.schemas.errors import InvalidSchema

            raise InvalidSchema(str(exc)) from None


class _SortedJsonSchema:
    def __init__(self, canonical: str) -> None:
        self.canonical = canonical

    def normalized(self) -> str:
        return self.canonical

    def incompatibilities(self, old: object) -> list[str]:
        return [] if "breaking" not in self.canonical else ["{errorType:'BREAKING', description:'b'}"]


def test_another_format_plugs_into_the_table(node: Node, monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.coordinator.schemas import formats

    with pytest.raises(InvalidSchemaError, match="Invalid schema type SORTED_JSON"):
        node.registry.register("j", "SORTED_JSON", '{"type": "object"}')
    monkeypatch.setitem(formats.FORMATS, "SORTED_JSON", _SortedJson())
    first = node.registry.register("j", "SORTED_JSON", '{"type": "object", "a": 1}')
    assert node.registry.register("k", "SORTED_JSON", '{"a": 1, "type": "object"}').id == first.id
    with pytest.raises(IncompatibleSchema, match="Incompatible because of different schema type"):
        node.registry.register("k", "AVRO", V1)
    node.registry.set_config("k", "NONE")
    assert node.registry.register("k", "AVRO", V1).id != first.id
    with pytest.raises(IncompatibleSchema):
        node.registry.register("j", "SORTED_JSON", '{"breaking": true}')
    assert node.restart().registry.version("j", 1).schema_type == "SORTED_JSON"
