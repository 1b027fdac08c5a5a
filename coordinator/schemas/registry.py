"""The schema registry: subjects and their versions, global ids, compatibility configs and modes, kept in
the compacted `_schemas` topic (coordinator/schemas/records.py) as Confluent Schema Registry keeps them.

Every change is appended to `_schemas` through the broker's log and then applied to memory by the same
code that replays the topic at start, so what survives a restart (or kill -9) is exactly what was
answered. Ids are global: a schema registered again, under any subject, gets the id it already has
(same format, same canonical text, same references); a new one gets the highest id seen plus one.
Versions count per subject and go on from the highest, soft-deleted ones included.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any

from minikafka.coordinator.ports import LogManager, PartitionLog
from minikafka.coordinator.replay import iter_partition_batches
from minikafka.coordinator.schemas import records
from minikafka.coordinator.schemas.compatibility import (
    DEFAULT_LEVEL,
    CompatibilityLevel,
    EarlierVersion,
    incompatibilities,
)
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.formats import FORMATS, ParsedSchema
from minikafka.coordinator.schemas.records import SCHEMAS_TOPIC, Reference, SchemaValue
from minikafka.coordinator.schemas.registry_errors import (
    IncompatibleSchema,
    InvalidCompatibilityLevel,
    InvalidMode,
    InvalidSchemaError,
    InvalidVersion,
    OperationNotPermitted,
    ReferenceExists,
    SchemaNotFound,
    SubjectConfigNotFound,
    SubjectModeNotFound,
    SubjectNotFound,
    SubjectNotSoftDeleted,
    SubjectSoftDeleted,
    VersionNotFound,
    VersionNotSoftDeleted,
    VersionSoftDeleted,
)
from minikafka.protocol.records import build_one_record_batch
from minikafka.storage.origin import AppendOrigin

_log = logging.getLogger("minikafka.coordinator.schemas")

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True)
class RegisteredSchema:
    """What /schemas/ids/{id} answers."""

    id: int
    schema_type: str
    schema: str
    references: tuple[Reference, ...]


def _level(value: object) -> CompatibilityLevel:
    try:
        return CompatibilityLevel(str(value).upper())
    except ValueError:
        raise InvalidCompatibilityLevel(value) from None


def _mode(value: object) -> str:
    mode = str(value).upper()
    if mode not in MODES:
        raise InvalidMode(value)
    return mode


def parse_version(text: str | int) -> int | None:
    """A version from a path: a number from 1 up, or "latest" / -1 (None: the latest)."""
    if isinstance(text, int) or (isinstance(text, str) and text.lstrip("-").isdigit()):
        number = int(text)
        if number == -1:
            return None
        if 1 <= number <= MAX_VERSION:
            return number
        raise InvalidVersion(text)
    if text == "latest":
        return None
    raise InvalidVersion(text)


class SchemaRegistry:
    def __init__(self, logs: LogManager, now_ms: Callable[[], int]) -> None:
        self._logs = logs
        self._now_ms = now_ms
        self.loaded = False
        self._clear()
        # Ids only ever grow in this process, across resets too: clients cache what an id means.
        self._max_id = 0

    def _clear(self) -> None:
        self._versions: dict[str, dict[int, SchemaValue]] = {}
        self._by_id: dict[int, SchemaValue] = {}
        self._ids: dict[tuple[str, str, tuple[Reference, ...]], int] = {}
        self._parsed: dict[int, ParsedSchema] = {}
        self._configs: dict[str | None, CompatibilityLevel] = {}
        self._modes: dict[str | None, str] = {}
        self._deleted_subject_keys: set[str] = set()

    # --- _schemas ----------------------------------------------------------------------------

    def _log(self, create: bool) -> PartitionLog | None:
        if self._logs.topic(SCHEMAS_TOPIC) is None:
            if not create:
                return None
            # One partition, compacted: what Confluent's kafkastore.topic is.
            self._logs.create_topic(SCHEMAS_TOPIC, 1, {"cleanup.policy": "compact"})
        return self._logs.partition(SCHEMAS_TOPIC, 0)

    def _write(self, key: bytes, value: dict[str, Any] | SchemaValue | None) -> None:
        log = self._log(create=True)
        assert log is not None
        now = self._now_ms()
        encoded = records.encode(value)
        batch, header = build_one_record_batch(key, encoded, now)
        log.append(batch, now, [(0, header)], origin=AppendOrigin.COORDINATOR)
        self._apply(key, encoded)

    def load(self) -> None:
        for _step in self.load_steps():
            pass

    def load_steps(self) -> Iterator[None]:
        log = self._log(create=False)
        if log is not None:
            for batch in iter_partition_batches(log, skip_control=True):
                for record in batch.records:
                    if record.key is not None:
                        self._replay(record.key, record.value)
                yield
        self.loaded = True

    def _replay(self, key: bytes, value: bytes | None) -> None:
        # Any Kafka client may write to `_schemas`: a record that is not one of Confluent's is skipped, never
        # a reason to refuse to start.
        try:
            self._apply(key, value)
        except (records.CorruptSchemasRecord, ValueError, TypeError, KeyError, AttributeError) as exc:
            _log.warning("skipping a _schemas record: %s", exc)

    def _apply(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        key = records.decode_key(key_bytes)
        value = records.decode_value(value_bytes)
        keytype = key["keytype"]
        subject = key.get("subject")
        if keytype == "SCHEMA":
            self._apply_schema(str(subject), int(key.get("version", 0)), value)
        elif keytype == "CONFIG":
            self._apply_setting(self._configs, subject, value, "compatibilityLevel", _level)
        elif keytype == "MODE":
            self._apply_setting(self._modes, subject, value, "mode", _mode)
        elif keytype == "DELETE_SUBJECT" and value is not None:
            self._deleted_subject_keys.add(str(subject))
            upto = int(value.get("version", MAX_VERSION))
            versions = self._versions.get(str(subject), {})
            for number, stored in list(versions.items()):
                if number <= upto:
                    versions[number] = replace(stored, deleted=True)

    def _apply_setting(self, table: dict[str | None, Any], subject: object, value: dict[str, Any] | None,
                       field: str, convert: Callable[[object], Any]) -> None:
        name = None if subject is None else str(subject)
        if value is None or value.get(field) is None:
            table.pop(name, None)
        else:
            try:
                table[name] = convert(value[field])
            except (InvalidCompatibilityLevel, InvalidMode) as exc:
                raise records.CorruptSchemasRecord(str(exc)) from None

    def _apply_schema(self, subject: str, version: int, value: dict[str, Any] | None) -> None:
        if value is None:
            versions = self._versions.get(subject, {})
            versions.pop(version, None)
            if not versions:
                self._versions.pop(subject, None)
            return
        stored = records.schema_value_from(value)
        self._versions.setdefault(subject, {})[version] = stored
        self._max_id = max(self._max_id, stored.id)
        self._by_id.setdefault(stored.id, stored)
        parsed = self._parsed.get(stored.id)
        if parsed is None:
            try:
                parsed = self._parse(stored.schema_type, stored.schema, stored.references)
            except (InvalidSchemaError, SubjectNotFound, VersionNotFound):
                return  # a format this broker lacks, or written by another tool: kept, never matched
            self._parsed[stored.id] = parsed
        self._ids.setdefault((stored.schema_type, parsed.canonical, stored.references), stored.id)

    # --- reading ---------------------------------------------------------------------------------

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return sorted(subject for subject, versions in self._versions.items()
                      if subject.startswith(prefix) and any(deleted or not v.deleted for v in versions.values()))

    def _subject_versions(self, subject: str, deleted: bool) -> dict[int, SchemaValue]:
        versions = {number: stored for number, stored in self._versions.get(subject, {}).items()
                    if deleted or not stored.deleted}
        if not versions:
            raise SubjectNotFound(subject)
        return versions

    def all_versions(self, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[SchemaValue]:
        """Every subject's versions (GET /schemas), by subject then version; `latest_only`: each one's latest."""
        found = []
        for subject in self.subjects(deleted, prefix):
            versions = self._subject_versions(subject, deleted)
            numbers = sorted(versions)[-1:] if latest_only else sorted(versions)
            found += [versions[n] for n in numbers]
        return found

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        return sorted(self._subject_versions(subject, deleted))

    def version(self, subject: str, version: str | int, deleted: bool = False) -> SchemaValue:
        number = parse_version(version)
        versions = self._subject_versions(subject, deleted)
        if number is None:
            return versions[max(versions)]
        if number not in versions:
            raise VersionNotFound(version)
        return versions[number]

    def schema_by_id(self, schema_id: int, subject: str | None = None) -> RegisteredSchema:
        holders = [v for versions in self._versions.values() for v in versions.values() if v.id == schema_id]
        if subject:
            holders = [v for v in holders if v.subject == subject]
        if not holders:
            raise SchemaNotFound(f"Schema {schema_id} not found")
        first = self._by_id.get(schema_id, holders[0])
        return RegisteredSchema(schema_id, first.schema_type, first.schema, first.references)

    def versions_of_id(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        found = sorted((v.subject, v.version) for versions in self._versions.values() for v in versions.values()
                       if v.id == schema_id and (deleted or not v.deleted))
        if not found and not deleted:
            self.schema_by_id(schema_id)  # 40403 when the id is unknown
        return found

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        target = self.version(subject, version)
        return sorted({v.id for versions in self._versions.values() for v in versions.values() if not v.deleted
                       and any(r.subject == subject and r.version == target.version for r in v.references)})

    def lookup(self, subject: str, schema_type: str, text: str, references: tuple[Reference, ...] = (),
               normalize: bool = False, deleted: bool = False) -> SchemaValue:
        versions = self._subject_versions(subject, deleted)
        parsed, _text = self._parse_new(schema_type, text, references, normalize)
        for number in sorted(versions, reverse=True):
            if self._same(versions[number], schema_type, parsed, references):
                return versions[number]
        raise SchemaNotFound()

    def _same(self, stored: SchemaValue, schema_type: str, parsed: ParsedSchema,
              references: tuple[Reference, ...]) -> bool:
        known = self._parsed.get(stored.id)
        return (stored.schema_type == schema_type and stored.references == references and known is not None
                and known.canonical == parsed.canonical)

    # --- parsing -----------------------------------------------------------------------------------

    def _resolve_references(self, references: tuple[Reference, ...], into: dict[str, str]) -> None:
        """Every schema the references name, theirs first (a reference's own references come before it)."""
        for reference in references:
            if reference.name in into:
                continue
            try:
                target = self.version(reference.subject, reference.version)
            except (SubjectNotFound, VersionNotFound, InvalidVersion):
                raise InvalidSchemaError(f"Invalid schema: reference {reference.name!r} to subject "
                                         f"{reference.subject!r} version {reference.version} does not exist") from None
            self._resolve_references(target.references, into)
            into[reference.name] = target.schema

    def _parse(self, schema_type: str, text: str, references: tuple[Reference, ...]) -> ParsedSchema:
        schema_format = FORMATS.get(schema_type)
        if schema_format is None:
            raise InvalidSchemaError(f"Invalid schema type {schema_type}")
        resolved: dict[str, str] = {}
        self._resolve_references(references, resolved)
        try:
            return schema_format.parse(text, resolved)
        except InvalidSchema as exc:
            raise InvalidSchemaError(str(exc) if str(exc).startswith("Invalid schema") else
                                     f"Invalid schema: {exc}") from None
        except RecursionError:
            raise InvalidSchemaError("Invalid schema: nested too deeply") from None

    def _parse_new(self, schema_type: str, text: str, references: tuple[Reference, ...],
                   normalize: bool) -> tuple[ParsedSchema, str]:
        """The parsed schema and the text to store: with `normalize`, the normalized text."""
        parsed = self._parse(schema_type, text, references)
        if normalize:
            text = parsed.normalized()
            parsed = self._parse(schema_type, text, references)
        return parsed, text

    # --- registering -------------------------------------------------------------------------------

    def register(self, subject: str, schema_type: str, text: str, references: tuple[Reference, ...] = (),
                 normalize: bool = False, schema_id: int | None = None, version: int | None = None) -> SchemaValue:
        """The subject's version holding the schema, registered now unless it is there already; refuses an
        incompatible schema (IncompatibleSchema, 409) unless the mode is IMPORT."""
        mode = self.mode(subject)
        if mode == "READONLY":
            raise OperationNotPermitted(f"Subject {subject} is in read-only mode")
        parsed, text = self._parse_new(schema_type, text, references, normalize)
        live = {n: v for n, v in self._versions.get(subject, {}).items() if not v.deleted}
        for number in sorted(live, reverse=True):
            if self._same(live[number], schema_type, parsed, references) and (
                    schema_id is None or live[number].id == schema_id):
                return live[number]
        if schema_id is not None or version is not None:
            if mode != "IMPORT":
                raise OperationNotPermitted(f"Subject {subject} is not in import mode")
        else:
            self._check_compatible(subject, parsed, schema_type, live)
        new_id = self._id_for(schema_type, parsed, references, schema_id)
        all_versions = self._versions.get(subject, {})
        number = version if version is not None else max(all_versions, default=0) + 1
        if version is not None and version in all_versions:
            raise OperationNotPermitted(f"Overwrite new schema with version {version} is not permitted.")
        stored = SchemaValue(subject, number, new_id, schema_type, text, references)
        self._write(records.schema_key(subject, number), stored)
        self._parsed.setdefault(new_id, parsed)
        self._ids.setdefault((schema_type, parsed.canonical, references), new_id)
        return stored

    def _id_for(self, schema_type: str, parsed: ParsedSchema, references: tuple[Reference, ...],
                schema_id: int | None) -> int:
        known = self._ids.get((schema_type, parsed.canonical, references))
        if schema_id is None:
            return known if known is not None else self._max_id + 1
        existing = self._parsed.get(schema_id)
        if schema_id in self._by_id and (existing is None or existing.canonical != parsed.canonical):
            raise OperationNotPermitted(f"Overwrite new schema with id {schema_id} is not permitted.")
        return schema_id

    def _check_compatible(self, subject: str, parsed: ParsedSchema, schema_type: str,
                          live: Mapping[int, SchemaValue]) -> None:
        messages = self._incompatibilities(subject, parsed, schema_type, [live[n] for n in sorted(live)])
        if messages:
            raise IncompatibleSchema(subject, messages)

    def _incompatibilities(self, subject: str, parsed: ParsedSchema, schema_type: str,
                           earlier: list[SchemaValue]) -> list[str]:
        level = self.compatibility(subject)
        olds = []
        for stored in earlier:
            old = self._parsed.get(stored.id)
            if old is None:
                raise InvalidSchemaError(f"Invalid schema: version {stored.version} of {subject} cannot be parsed")
            olds.append(EarlierVersion(stored.version, stored.schema, old, stored.schema_type))
        return incompatibilities(level, parsed, olds, schema_type)

    def check_compatibility(self, subject: str, version: str | int | None, schema_type: str, text: str,
                            references: tuple[Reference, ...], normalize: bool = False) -> list[str]:
        """/compatibility: the messages (empty: compatible) against one version, or with `version` None
        against the versions the subject's level checks."""
        parsed, _text = self._parse_new(schema_type, text, references, normalize)
        live = {n: v for n, v in self._versions.get(subject, {}).items() if not v.deleted}
        every = [live[n] for n in sorted(live)]
        if version is None:
            return self._incompatibilities(subject, parsed, schema_type, every)
        target = self.version(subject, version)
        if self.compatibility(subject).transitive and parse_version(version) is None:
            return self._incompatibilities(subject, parsed, schema_type, every)
        return self._incompatibilities(subject, parsed, schema_type, [target])

    # --- deleting --------------------------------------------------------------------------------------

    def _writable(self, subject: str) -> None:
        if self.mode(subject) == "READONLY":
            raise OperationNotPermitted(f"Subject {subject} is in read-only mode")

    def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        self._writable(subject)
        if subject not in self._versions:
            raise SubjectNotFound(subject)
        number = parse_version(version)
        if number is None:
            stored = self.version(subject, "latest", deleted=permanent)
        else:
            found = self._versions[subject].get(number)
            if found is None:
                raise VersionNotFound(version)
            stored = found
        if permanent:
            if not stored.deleted:
                raise VersionNotSoftDeleted(subject, stored.version)
            self._write(records.schema_key(subject, stored.version), None)
            return stored.version
        if stored.deleted:
            raise VersionSoftDeleted(subject, stored.version)
        self._refuse_referenced(subject, [stored.version])
        self._write(records.schema_key(subject, stored.version), replace(stored, deleted=True))
        return stored.version

    def _refuse_referenced(self, subject: str, numbers: list[int]) -> None:
        for number in numbers:
            users = self.referenced_by(subject, number)
            if users:
                raise ReferenceExists(f"One or more references exist to the schema {{magic=1,keytype=SCHEMA,"
                                      f"subject={subject},version={number}}}.")

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        self._writable(subject)
        versions = self._versions.get(subject)
        if not versions:
            raise SubjectNotFound(subject)
        live = sorted(n for n, v in versions.items() if not v.deleted)
        if permanent:
            if live:
                raise SubjectNotSoftDeleted(subject)
            numbers = sorted(versions)
            for number in numbers:
                self._write(records.schema_key(subject, number), None)
            for table, key in ((self._configs, records.config_key), (self._modes, records.mode_key)):
                if subject in table:
                    self._write(key(subject), None)
            if subject in self._deleted_subject_keys:
                self._write(records.delete_subject_key(subject), None)
                self._deleted_subject_keys.discard(subject)
            return numbers
        if not live:
            raise SubjectSoftDeleted(subject)
        self._refuse_referenced(subject, live)
        self._write(records.delete_subject_key(subject), {"subject": subject, "version": max(versions)})
        return live

    # --- config and mode -------------------------------------------------------------------------------

    def compatibility(self, subject: str | None = None) -> CompatibilityLevel:
        if subject is not None and subject in self._configs:
            return self._configs[subject]
        return self._configs.get(None, DEFAULT_LEVEL)

    def config(self, subject: str | None, default_to_global: bool = False) -> CompatibilityLevel:
        if subject is None or default_to_global:
            return self.compatibility(subject)
        if subject not in self._configs:
            raise SubjectConfigNotFound(subject)
        return self._configs[subject]

    def set_config(self, subject: str | None, level: object) -> CompatibilityLevel:
        new = _level(level)
        if subject is not None:
            self._writable(subject)
        self._write(records.config_key(subject), {"compatibilityLevel": new.value})
        return new

    def delete_config(self, subject: str | None) -> CompatibilityLevel:
        if subject is None:
            old = self.compatibility(None)
            if None in self._configs:
                self._write(records.config_key(None), None)
            return old
        if subject not in self._configs:
            if subject not in self._versions:
                raise SubjectNotFound(subject)
            raise SubjectConfigNotFound(subject)
        old = self._configs[subject]
        self._write(records.config_key(subject), None)
        return old

    def mode(self, subject: str | None = None, default_to_global: bool = True) -> str:
        if subject is not None and subject in self._modes:
            return self._modes[subject]
        if subject is not None and not default_to_global:
            raise SubjectModeNotFound(subject)
        return self._modes.get(None, "READWRITE")

    def set_mode(self, subject: str | None, mode: object, force: bool = False) -> str:
        new = _mode(mode)
        if new == "IMPORT" and not force:
            holding = self.subjects() if subject is None else [s for s in self.subjects() if s == subject]
            if holding:
                raise OperationNotPermitted("Cannot import since found existing subjects")
        self._write(records.mode_key(subject), {"mode": new})
        return new

    def delete_mode(self, subject: str) -> str:
        if subject not in self._modes:
            raise SubjectModeNotFound(subject)
        old = self._modes[subject]
        self._write(records.mode_key(subject), None)
        return old

    # --- the control plane ---------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every subject, config and mode (tombstones in `_schemas`, so a restart agrees); ids go on
        from where they were."""
        for subject, versions in list(self._versions.items()):
            for number in list(versions):
                self._write(records.schema_key(subject, number), None)
        for configured in list(self._configs):
            self._write(records.config_key(configured), None)
        for moded in list(self._modes):
            self._write(records.mode_key(moded), None)
        for subject in list(self._deleted_subject_keys):
            self._write(records.delete_subject_key(subject), None)
        max_id = self._max_id
        self._clear()
        self._max_id = max_id

    def summary(self) -> dict[str, Any]:
        """What the inspector shows: each subject's versions (with ids), its level, the global level and mode."""
        return {
            "compatibility": self.compatibility(None).value,
            "mode": self.mode(None),
            "subjects": {
                subject: {
                    "compatibility": self.compatibility(subject).value,
                    "versions": [{"version": n, "id": v.id, "schema_type": v.schema_type, "deleted": v.deleted}
                                 for n, v in sorted(versions.items())],
                }
                for subject, versions in sorted(self._versions.items())
            },
        }
