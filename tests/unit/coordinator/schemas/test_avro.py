"""Avro: canonical equality and the schema resolution rules, on the cases Confluent's and Avro's docs give."""

from __future__ import annotations

import json
from typing import Any

import pytest
from minikafka.coordinator.schemas.avro import AVRO_FORMAT, AvroSchema
from minikafka.coordinator.schemas.compatibility import CompatibilityLevel, EarlierVersion, incompatibilities
from minikafka.coordinator.schemas.errors import InvalidSchema


def avro(schema: Any, references: dict[str, str] | None = None) -> AvroSchema:
    return AVRO_FORMAT.parse(json.dumps(schema), references or {})


def record(*fields: dict[str, Any], name: str = "r", **extra: Any) -> AvroSchema:
    return avro({"type": "record", "name": name, "fields": list(fields), **extra})


def kinds(messages: list[str]) -> list[str]:
    return [m.split("'")[1] for m in messages if m.startswith("{errorType")]


def test_spelling_does_not_make_a_different_schema() -> None:
    a = avro({"type": "record", "name": "User", "namespace": "com.x", "fields": [{"name": "f", "type": "string"}]})
    b = avro({"fields": [{"type": {"type": "string"}, "name": "f"}], "name": "com.x.User", "type": "record"})
    assert a.canonical == b.canonical
    with_default = avro({"type": "record", "name": "com.x.User",
                         "fields": [{"name": "f", "type": "string", "default": ""}]})
    assert with_default.canonical != a.canonical


@pytest.mark.parametrize("text", ["{", '{"type": "record"}', '{"type": "nosuchtype"}', '"Undefined"',
                                  '{"type": "enum", "name": "E", "symbols": ["A", "A"]}',
                                  '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "X"}]}'])
def test_invalid_schemas(text: str) -> None:
    with pytest.raises(InvalidSchema):
        AVRO_FORMAT.parse(text, {})


# Confluent's documented BACKWARD examples: adding a field with a default, deleting a field.
def test_adding_a_field_needs_a_default_for_backward() -> None:
    old = record({"name": "f1", "type": "string"})
    assert record({"name": "f1", "type": "string"}, {"name": "f2", "type": "string", "default": "foo"}) \
        .incompatibilities(old) == []
    added = record({"name": "f1", "type": "string"}, {"name": "f2", "type": "string"})
    assert added.incompatibilities(old) == [
        "{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'f2' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'f2'}"]
    assert old.incompatibilities(added) == []  # FORWARD: the old reader skips the new field
    deleted = record({"name": "f2", "type": "string", "default": "x"})
    assert deleted.incompatibilities(old) == []


@pytest.mark.parametrize(("writer", "reader"), [("int", "long"), ("int", "float"), ("int", "double"),
                                                ("long", "float"), ("long", "double"), ("float", "double"),
                                                ("string", "bytes"), ("bytes", "string")])
def test_promotions(writer: str, reader: str) -> None:
    assert avro(reader).incompatibilities(avro(writer)) == []
    assert kinds(avro(writer).incompatibilities(avro(reader))) == (["TYPE_MISMATCH"] if {writer, reader} !=
                                                                     {"string", "bytes"} else [])


def test_enums_unions_fixed_names_aliases() -> None:
    abc = avro({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    ab = avro({"type": "enum", "name": "E", "symbols": ["A", "B"]})
    ab_default = avro({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})
    assert kinds(ab.incompatibilities(abc)) == ["MISSING_ENUM_SYMBOLS"]
    assert ab_default.incompatibilities(abc) == [] and abc.incompatibilities(ab) == []
    assert avro(["null", "string"]).incompatibilities(avro("string")) == []
    assert kinds(avro("string").incompatibilities(avro(["null", "string"]))) == ["TYPE_MISMATCH"]
    assert kinds(avro(["null", "int"]).incompatibilities(avro(["null", "string"]))) == ["MISSING_UNION_BRANCH"]
    assert kinds(avro({"type": "fixed", "name": "F", "size": 4}).incompatibilities(
        avro({"type": "fixed", "name": "F", "size": 8}))) == ["FIXED_SIZE_MISMATCH"]
    renamed = record({"name": "f", "type": "int"}, name="New")
    assert kinds(renamed.incompatibilities(record({"name": "f", "type": "int"}, name="Old"))) == ["NAME_MISMATCH"]
    aliased = record({"name": "f", "type": "int"}, name="New", aliases=["Old"])
    assert aliased.incompatibilities(record({"name": "f", "type": "int"}, name="Old")) == []
    field_alias = record({"name": "g", "type": "int", "aliases": ["f"]})
    assert field_alias.incompatibilities(record({"name": "f", "type": "int"})) == []


def test_recursive_types_and_references() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    assert avro(node).incompatibilities(avro(node)) == []
    user = json.dumps({"type": "record", "name": "com.x.User", "fields": [{"name": "n", "type": "string"}]})
    order = avro({"type": "record", "name": "Order", "fields": [{"name": "u", "type": "com.x.User"}]},
                 {"user": user})
    assert order.canonical == '{"type":"record","name":"Order","fields":[{"name":"u","type":"com.x.User"}]}'


def test_levels() -> None:
    v1 = record({"name": "a", "type": "string"}, {"name": "b", "type": "string"})
    v2 = record({"name": "a", "type": "string"}, {"name": "b", "type": "string"}, {"name": "c", "type": "int"})
    v3 = record({"name": "a", "type": "string"}, {"name": "c", "type": "int"})
    earlier = [EarlierVersion(1, "v1", v1), EarlierVersion(2, "v2", v2)]
    assert incompatibilities(CompatibilityLevel.BACKWARD, v3, earlier) == []
    assert incompatibilities(CompatibilityLevel.FORWARD, v3, earlier)[-3:] == [
        "{oldSchemaVersion: 2}", "{oldSchema: 'v2'}", "{compatibility: 'FORWARD'}"]
    assert incompatibilities(CompatibilityLevel.NONE, v3, earlier) == []
    v4 = record({"name": "a", "type": "string"}, {"name": "c", "type": "int", "default": 0})
    assert incompatibilities(CompatibilityLevel.BACKWARD_TRANSITIVE, v4, earlier) == []
    assert incompatibilities(CompatibilityLevel.FULL_TRANSITIVE, v4, earlier) != []
