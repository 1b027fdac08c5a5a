"""What the registry needs of a schema format: parse a schema's text, say when two schemas are the same
schema, and say why a new schema cannot read data written with an old one.

Each format (AVRO, JSON and PROTOBUF, each in its own module) is a `SchemaFormat` in `FORMATS`; a
`schemaType` the table does not hold is refused as Confluent refuses a type it has no provider for
(42201, "Invalid schema type X").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from minikafka.coordinator.schemas.avro import AVRO_FORMAT
from minikafka.coordinator.schemas.json_schema import JSON_SCHEMA_FORMAT
from minikafka.coordinator.schemas.protobuf import PROTOBUF_FORMAT


class ParsedSchema(Protocol):
    # Equality as Confluent decides it: the same schema registered again gets the same id.
    canonical: str

    def normalized(self) -> str:
        """The text `normalize=true` registers and looks up."""
        ...

    def incompatibilities(self, old: ParsedSchema) -> list[str]:
        """Messages in Confluent's verbose style, empty when `self` can read data written with `old`
        (BACKWARD); FORWARD is `old.incompatibilities(new)`."""
        ...


class SchemaFormat(Protocol):
    name: str  # "AVRO" | "JSON" | "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ParsedSchema:
        """`references`: reference name -> the referenced schema's text, every schema it needs (the
        registry resolves references of references). Raises InvalidSchema."""
        ...


FORMATS: dict[str, SchemaFormat] = {schema_format.name: schema_format
                                    for schema_format in (AVRO_FORMAT, JSON_SCHEMA_FORMAT, PROTOBUF_FORMAT)}
