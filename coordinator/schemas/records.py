"""`_schemas` records in Confluent Schema Registry's JSON formats (Karapace writes the same), so a registry
that replays the topic, and any Kafka client that reads it, understands them:

    SCHEMA          key {"keytype":"SCHEMA","subject":S,"version":V,"magic":1}
                    value {"subject":S,"version":V,"id":N,"schemaType":T (absent for AVRO),
                           "references":[{"name","subject","version"}] (absent when none),"schema":TEXT,
                           "deleted":BOOL}; null: the version is permanently deleted
    CONFIG          key {"keytype":"CONFIG","subject":S|null,"magic":0}  value {"compatibilityLevel":L}|null
    MODE            key {"keytype":"MODE","subject":S|null,"magic":0}    value {"mode":M}|null
    DELETE_SUBJECT  key {"keytype":"DELETE_SUBJECT","subject":S,"magic":0}
                    value {"subject":S,"version":V}: every version up to V is soft deleted
    NOOP            key {"keytype":"NOOP","magic":0}: written by Confluent to sync readers; nothing to apply
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMAS_TOPIC = "_schemas"


class CorruptSchemasRecord(ValueError):
    """A `_schemas` record that is not one of the formats above."""


@dataclass(frozen=True)
class Reference:
    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class SchemaValue:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...] = ()
    deleted: bool = False

    def as_json(self) -> dict[str, Any]:
        value: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != "AVRO":
            value["schemaType"] = self.schema_type
        if self.references:
            value["references"] = [reference.as_json() for reference in self.references]
        value["schema"] = self.schema
        value["deleted"] = self.deleted
        return value


def _dumps(document: dict[str, Any]) -> bytes:
    return json.dumps(document, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dumps({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dumps({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dumps({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def encode(value: dict[str, Any] | SchemaValue | None) -> bytes | None:
    if value is None:
        return None
    return _dumps(value.as_json() if isinstance(value, SchemaValue) else value)


def decode_key(data: bytes) -> dict[str, Any]:
    try:
        key = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptSchemasRecord(f"key is not JSON: {exc}") from None
    if not isinstance(key, dict) or not isinstance(key.get("keytype"), str):
        raise CorruptSchemasRecord(f"key has no keytype: {data[:100]!r}")
    return key


def decode_value(data: bytes | None) -> dict[str, Any] | None:
    if data is None:
        return None
    try:
        value = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptSchemasRecord(f"value is not JSON: {exc}") from None
    if value is not None and not isinstance(value, dict):
        raise CorruptSchemasRecord(f"value is not a JSON object: {data[:100]!r}")
    return value


def schema_value_from(value: dict[str, Any]) -> SchemaValue:
    try:
        return SchemaValue(
            subject=str(value["subject"]), version=int(value["version"]), id=int(value["id"]),
            schema_type=str(value.get("schemaType") or "AVRO"), schema=str(value["schema"]),
            references=tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                             for r in value.get("references") or ()),
            deleted=bool(value.get("deleted", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise CorruptSchemasRecord(f"SCHEMA value lacks {exc}") from None
