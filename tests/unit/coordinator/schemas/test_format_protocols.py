"""Both formats satisfy the registry's format interface (a local copy of coordinator/schemas/formats.py's Protocols).

The registry's own module is written on another branch; this copy lets mypy and this test check the formats
structurally without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

import pytest
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.json_schema import JSON_SCHEMA_FORMAT
from minikafka.coordinator.schemas.protobuf import PROTOBUF_FORMAT


@runtime_checkable
class ParsedSchema(Protocol):
    canonical: str

    def normalized(self) -> str: ...

    def incompatibilities(self, old: ParsedSchema) -> list[str]: ...


@runtime_checkable
class SchemaFormat(Protocol):
    name: str

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema: ...


FORMATS: list[SchemaFormat] = [JSON_SCHEMA_FORMAT, PROTOBUF_FORMAT]
EXAMPLES = {"JSON": '{"type": "object", "properties": {"a": {"type": "string"}}}',
            "PROTOBUF": 'syntax = "proto3"; message A { string a = 1; }'}


@pytest.mark.parametrize("schema_format", FORMATS, ids=lambda f: f.name)
def test_formats_satisfy_the_protocols(schema_format: SchemaFormat) -> None:
    assert isinstance(schema_format, SchemaFormat)
    parsed = schema_format.parse(EXAMPLES[schema_format.name], {})
    assert isinstance(parsed, ParsedSchema)
    assert isinstance(parsed.canonical, str) and isinstance(parsed.normalized(), str)
    assert parsed.incompatibilities(parsed) == []


def test_a_schema_of_the_other_format_is_incompatible_not_an_error() -> None:
    json_schema = JSON_SCHEMA_FORMAT.parse(EXAMPLES["JSON"], {})
    proto_schema = PROTOBUF_FORMAT.parse(EXAMPLES["PROTOBUF"], {})
    assert json_schema.incompatibilities(proto_schema) != []
    assert proto_schema.incompatibilities(json_schema) != []


@pytest.mark.parametrize("schema_format", FORMATS, ids=lambda f: f.name)
def test_invalid_schema_is_a_value_error_with_a_message(schema_format: SchemaFormat) -> None:
    with pytest.raises(InvalidSchema) as caught:
        schema_format.parse("{ not a schema", {})
    assert isinstance(caught.value, ValueError) and str(caught.value)
