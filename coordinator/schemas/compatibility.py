"""Compatibility levels, whatever the format: which earlier versions a new schema is checked against, and in
which direction (BACKWARD: the new schema reads data written with the old; FORWARD: the old reads the new;
FULL: both). The *_TRANSITIVE levels check every earlier version, the others only the latest."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from minikafka.coordinator.schemas.formats import ParsedSchema


class CompatibilityLevel(enum.Enum):
    BACKWARD = "BACKWARD"
    BACKWARD_TRANSITIVE = "BACKWARD_TRANSITIVE"
    FORWARD = "FORWARD"
    FORWARD_TRANSITIVE = "FORWARD_TRANSITIVE"
    FULL = "FULL"
    FULL_TRANSITIVE = "FULL_TRANSITIVE"
    NONE = "NONE"

    @property
    def transitive(self) -> bool:
        return self.value.endswith("_TRANSITIVE")

    @property
    def backward(self) -> bool:
        return self.value.startswith(("BACKWARD", "FULL"))

    @property
    def forward(self) -> bool:
        return self.value.startswith(("FORWARD", "FULL"))


DEFAULT_LEVEL = CompatibilityLevel.BACKWARD


DIFFERENT_TYPE = "Incompatible because of different schema type"


@dataclass(frozen=True)
class EarlierVersion:
    version: int
    text: str
    parsed: ParsedSchema
    schema_type: str = "AVRO"


def incompatibilities(level: CompatibilityLevel, new: ParsedSchema, earlier: Sequence[EarlierVersion],
                      new_type: str = "AVRO") -> list[str]:
    """Confluent's verbose messages for the first earlier version (newest first) the new schema fails
    against, each followed by that version, its schema and the level; empty when compatible. A schema of
    another format than an earlier one is never compatible with it (unless the level is NONE)."""
    if level is CompatibilityLevel.NONE or not earlier:
        return []
    checked = earlier if level.transitive else earlier[-1:]
    for old in reversed(checked):
        found: list[str] = []
        if old.schema_type != new_type:
            found.append(DIFFERENT_TYPE)
        elif level.backward:
            found += new.incompatibilities(old.parsed)
        if level.forward and old.schema_type == new_type:
            found += old.parsed.incompatibilities(new)
        if found:
            return [*found, f"{{oldSchemaVersion: {old.version}}}", f"{{oldSchema: '{old.text}'}}",
                    f"{{compatibility: '{level.value}'}}"]
    return []
