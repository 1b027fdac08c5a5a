"""kio request and response bodies as JSON-ready values, for the flight recorder (broker/observe/recorder.py).

Generic over every kio entity: a plan per class, built once from its type hints, says how each field
is shown. Field names are kio's (Kafka's schema names in snake case); durations that kio turns into
timedeltas get back Kafka's `_ms` suffix and are shown in milliseconds, as are datetimes. Error codes
are shown by Kafka's name ("NOT_COORDINATOR"), UUIDs the way Kafka prints them (URL-safe base64), and
`bytes` fields as their size plus base64 when short.

`records` fields are never dumped: each batch is summarised from its 61-byte header alone, with
kafka-dump-log.sh's names (baseOffset, lastOffset, count, producerId, producerEpoch, baseSequence,
isTransactional, isControl, compresscodec, size, ...). With `decode_records` every record is decoded
too: offset, timestamp, key, value and headers (text when printable UTF-8, otherwise base64), and a
control record's endTxnMarker (COMMIT/ABORT) and coordinatorEpoch.

While walking, the topics a body names (fields typed TopicName, and topic ids resolved to names)
and the error codes it carries other than NONE are collected, for the recorder's filters and the
entry's "topics" and "errors".
"""

from __future__ import annotations

import base64
import dataclasses
import datetime
import operator
import struct
import types
import typing
import uuid
from collections.abc import Callable
from typing import Any

from kio.schema.types import TopicName
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.protocol.records import (
    CONTROL_FLAG,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    Compression,
    decode_batch,
    parse_control_record,
)
from minikafka.protocol.regions import FileRegion

# Longest `bytes` field value shown in base64; longer ones only by size.
MAX_BYTES_SHOWN = 256
# Batches summarised per exchange when records are not decoded: a fetch can return thousands of small
# batches, and the ring keeps each summary, so the rest are only counted ("batchesNotShown").
MAX_BATCHES_SUMMARISED = 64

_MS = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_ERROR_NAMES: dict[int, str] = {int(code): code.name.upper() for code in ErrorCode}
_CODEC_NAMES = {int(codec): codec.name.lower() for codec in Compression}
_NONE = ErrorCode.none
_WHITESPACE = frozenset("\t\n\r")
_DELETE_HORIZON_FLAG = 0x40
_BATCH_LENGTH = struct.Struct(">i")  # at byte 8 of a batch; enough to step over it without parsing
# Bytes read at a time when batch headers are taken from a file region: several small batches' headers
# per read, and no more than one page past a big batch's header.
_REGION_WINDOW = 4096

TopicResolver = Callable[[uuid.UUID], "str | None"]


def kafka_uuid(value: uuid.UUID) -> str:
    """Kafka prints Uuids as URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def error_name(code: int) -> str:
    return _ERROR_NAMES.get(int(code), f"UNKNOWN_ERROR_{int(code)}")


class Walk:
    """What one rendering collects, and how far it may go."""

    __slots__ = ("batch_budget", "decode_records", "errors", "records_bytes", "resolve_topic", "topics")

    def __init__(self, *, decode_records: bool = False, resolve_topic: TopicResolver | None = None) -> None:
        self.topics: set[str] = set()
        self.errors: set[str] = set()
        self.decode_records = decode_records
        self.resolve_topic = resolve_topic
        self.batch_budget = MAX_BATCHES_SUMMARISED
        self.records_bytes = 0  # of the record batches a snapshot let go of


# --- plans ------------------------------------------------------------------------------------------
# A plan per class: a getter that reads every field at once (operator.attrgetter, in C) and, per field,
# (attribute, shown name, kind, nested plan or None). Kinds are small ints so the walk is a chain of
# identity tests rather than calls.

_PLAIN, _ERROR, _TIMEDELTA, _DATETIME, _UUID, _BYTES, _RECORDS, _TOPIC, _ENTITY = range(9)
_ENTITIES, _PLAINS, _TOPICS, _UUIDS = range(9, 13)


class Plan:
    __slots__ = ("fields", "getter", "record_fields", "record_specs", "snapshotter")

    def __init__(self, fields: tuple[tuple[str, str, int, Plan | None], ...]) -> None:
        self.fields = fields
        self.snapshotter: Callable[[Any, Walk], Any] | None = None  # compiled on first use (snapshot, below)
        attributes = [attr for attr, _shown, _kind, _nested in fields]
        self.getter: Callable[[Any], tuple[Any, ...]]
        if not attributes:
            self.getter = lambda obj: ()
        elif len(attributes) == 1:
            only = operator.attrgetter(attributes[0])
            self.getter = lambda obj: (only(obj),)
        else:
            self.getter = operator.attrgetter(*attributes)
        # Positions of the fields that are, or lead to, record batches.
        self.record_fields: tuple[int, ...] = tuple(index for index, (_attr, _shown, kind, nested) in enumerate(fields)
                                   if kind == _RECORDS or (nested is not None and nested.record_fields))
        self.record_specs = tuple((index, fields[index][0], fields[index][2], fields[index][3])
                                  for index in self.record_fields)


def _unwrap_optional(hint: Any) -> Any:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        rest = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(rest) == 1:
            return rest[0]
    return hint


def _is_entity(hint: Any) -> bool:
    return isinstance(hint, type) and dataclasses.is_dataclass(hint)


def _scalar_kind(hint: Any, kafka_type: str | None) -> int:
    if kafka_type == "error_code":
        return _ERROR
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _TIMEDELTA
    if kafka_type == "datetime_i64":
        return _DATETIME
    if kafka_type == "uuid":
        return _UUID
    if kafka_type == "bytes":
        return _BYTES
    if kafka_type == "records":
        return _RECORDS
    if hint is TopicName:
        return _TOPIC
    return _PLAIN


_PLANS: dict[type, Plan] = {}


def plan_of(cls: type) -> Plan:
    """The plan of a kio entity class, made on first use."""
    plan = _PLANS.get(cls)
    if plan is None:
        plan = _PLANS[cls] = _make_plan(cls)
    return plan


def _make_plan(cls: type) -> Plan:
    hints = typing.get_type_hints(cls)
    fields: list[tuple[str, str, int, Plan | None]] = []
    for f in dataclasses.fields(cls):
        hint = _unwrap_optional(hints[f.name])
        kafka_type = f.metadata.get("kafka_type")
        shown = f.name
        if typing.get_origin(hint) is tuple:
            element = _unwrap_optional(typing.get_args(hint)[0])
            if _is_entity(element):
                fields.append((f.name, shown, _ENTITIES, plan_of(element)))
            elif element is TopicName:
                fields.append((f.name, shown, _TOPICS, None))
            elif kafka_type == "uuid":
                fields.append((f.name, shown, _UUIDS, None))
            else:
                fields.append((f.name, shown, _PLAINS, None))
        elif _is_entity(hint):
            fields.append((f.name, shown, _ENTITY, plan_of(hint)))
        else:
            kind = _scalar_kind(hint, kafka_type)
            if kind == _TIMEDELTA and not shown.endswith("_ms"):
                shown += "_ms"  # kio drops Kafka's "Ms" when it makes the value a timedelta
            fields.append((f.name, shown, kind, None))
    return Plan(tuple(fields))


_HAS_RECORDS: dict[type, bool] = {}


def has_records(cls: type) -> bool:
    """Whether bodies of `cls` can hold record batches (Produce requests, Fetch responses)."""
    answer = _HAS_RECORDS.get(cls)
    if answer is None:
        answer = _HAS_RECORDS[cls] = bool(plan_of(cls).record_fields)
    return answer


# --- snapshots: bodies with record batches, kept without their bytes -----------------------------------

class Snapshot:
    """An entity's field values in plan order, with record batches replaced by their headers."""

    __slots__ = ("plan", "values")

    def __init__(self, plan: Plan, values: list[Any]) -> None:
        self.plan = plan
        self.values = values


class Batches:
    """Record batches reduced to their 61-byte headers (copied), for rendering later."""

    __slots__ = ("headers", "not_shown", "partial", "size")

    def __init__(self, records: bytes | bytearray | memoryview | FileRegion, walk: Walk) -> None:
        self.size = size = len(records)
        budget = walk.batch_budget
        if (type(records) is bytes and size >= HEADER_SIZE and budget > 0
                and LOG_OVERHEAD + _BATCH_LENGTH.unpack_from(records, 8)[0] == size):
            # One whole batch: a producer's records for one partition nearly always are.
            self.headers = [(0, records[:HEADER_SIZE])]
            self.not_shown = self.partial = 0
            walk.batch_budget = budget - 1
            walk.records_bytes += size
            return
        locate = _region_locator(records) if isinstance(records, FileRegion) else _buffer_locator(records)
        headers: list[tuple[int, bytes]] = []
        self.headers = headers
        self.not_shown = 0
        unpack_length = _BATCH_LENGTH.unpack_from
        position = 0
        while size - position >= HEADER_SIZE:
            source, at = locate(position)
            if len(source) - at < HEADER_SIZE:
                break  # a region's file is shorter now than when it was read: the rest counts as partial
            end = position + LOG_OVERHEAD + unpack_length(source, at + 8)[0]
            if end > size or end - position < HEADER_SIZE:
                break  # a partial batch ends a fetch; a nonsensical length is reported by rendering
            if budget > 0:
                budget -= 1
                headers.append((position, bytes(source[at:at + HEADER_SIZE])))
            else:
                self.not_shown += 1
            position = end
        walk.batch_budget = budget
        walk.records_bytes += size
        self.partial = size - position
        if self.partial >= HEADER_SIZE:  # unreadable rather than partial: keep its header to say why
            source, at = locate(position)
            if len(source) - at >= HEADER_SIZE:
                headers.append((position, bytes(source[at:at + HEADER_SIZE])))


# Where a batch's header can be read: (buffer, offset in it). Headers kept are copied out with bytes(): a
# view would keep the whole buffer alive.
_Locator = Callable[[int], "tuple[bytes | memoryview, int]"]


def _buffer_locator(records: bytes | bytearray | memoryview) -> _Locator:
    source = records if type(records) is bytes else memoryview(records)
    return lambda position: (source, position)


def _region_locator(region: FileRegion) -> _Locator:
    """Headers from the region's file, read a window at a time: the record bytes were never in memory."""
    window, start = b"", 0

    def locate(position: int) -> tuple[bytes, int]:
        nonlocal window, start
        if position < start or position + HEADER_SIZE > start + len(window):
            window, start = region.pread(position, _REGION_WINDOW), position
        return window, position - start

    return locate


def snapshot(obj: Any, plan: Plan, walk: Walk) -> Any:
    """`obj` itself when it holds no record bytes (nothing big stays referenced), else a Snapshot."""
    snapshotter = plan.snapshotter
    if snapshotter is None:
        snapshotter = _compile_snapshotter(plan)
    return snapshotter(obj, walk)


def _compile_snapshotter(plan: Plan) -> Callable[[Any, Walk], Any]:
    """`snapshot` for one plan, generated as straight-line code over the fields that lead to record batches:
    the flight recorder reduces every Produce request it keeps, and a loop over the plan's fields, with
    a test of each field's kind, cost about as much again as the reduction itself."""
    names: dict[str, Any] = {"_plan": plan, "_getter": plan.getter, "_Batches": Batches, "_Snapshot": Snapshot}
    lines = ["def snapshot(obj, walk):", "    values = None"]
    take_values = ["if values is None:", "    values = list(_getter(obj))"]
    for index, attr, kind, nested in plan.record_specs:
        body: list[str]
        if kind == _RECORDS:
            body = [*take_values, f"values[{index}] = _Batches(value, walk)"]
        else:
            assert nested is not None
            inner = f"_nested{index}"
            names[inner] = nested.snapshotter or _compile_snapshotter(nested)
            if kind == _ENTITY:
                body = [f"new = {inner}(value, walk)",
                        "if new is not value:",
                        *(f"    {line}" for line in take_values),
                        f"    values[{index}] = new"]
            else:  # an array of entities
                body = ["items = None",
                        "for position, item in enumerate(value):",
                        f"    new = {inner}(item, walk)",
                        "    if new is not item:",
                        "        if items is None:",
                        "            items = list(value)",
                        "        items[position] = new",
                        "if items is not None:",
                        *(f"    {line}" for line in take_values),
                        f"    values[{index}] = items"]
        # None, an empty batch set or an empty array: nothing to let go of
        lines += [f"    value = obj.{attr}", "    if value:", *(f"        {line}" for line in body)]
    lines.append("    return obj if values is None else _Snapshot(_plan, values)")
    exec(compile("\n".join(lines), "<minikafka snapshot>", "exec"), names)  # our own source, from the plan
    snapshotter: Callable[[Any, Walk], Any] = names["snapshot"]
    plan.snapshotter = snapshotter
    return snapshotter


def regions_of(obj: Any, plan: Plan) -> list[FileRegion]:
    """The file regions among `obj`'s record sets (a Fetch answer's slices left in the log files)."""
    found: list[FileRegion] = []
    for _index, attr, kind, nested in plan.record_specs:
        value = getattr(obj, attr)
        if not value:
            continue
        if kind == _RECORDS:
            if type(value) is FileRegion:
                found.append(value)
        elif kind == _ENTITY:
            found += regions_of(value, nested)  # type: ignore[arg-type]
        else:
            for item in value:
                found += regions_of(item, nested)  # type: ignore[arg-type]
    return found


# --- rendering --------------------------------------------------------------------------------------

def render_body(body: Any, walk: Walk) -> dict[str, Any]:
    """`body` (a kio entity or its Snapshot) as JSON-ready values."""
    return _entity(body, body.plan if isinstance(body, Snapshot) else plan_of(type(body)), walk)


def _entity(obj: Any, plan: Plan, walk: Walk) -> dict[str, Any]:
    out: dict[str, Any] = {}
    values = obj.values if isinstance(obj, Snapshot) else plan.getter(obj)
    for (attr, shown, kind, nested), value in zip(plan.fields, values, strict=True):
        if value is None or kind == _PLAIN:
            out[shown] = value
        elif kind == _ERROR:
            name = _ERROR_NAMES.get(value) or error_name(value)
            if value != _NONE:
                walk.errors.add(name)
            out[shown] = name
        elif kind == _TOPIC:
            walk.topics.add(value)
            out[shown] = value
        elif kind == _ENTITIES:
            out[shown] = [_entity(item, nested, walk) for item in value]  # type: ignore[arg-type]
        elif kind == _ENTITY:
            out[shown] = _entity(value, nested, walk)  # type: ignore[arg-type]
        elif kind == _TIMEDELTA:
            out[shown] = value // _MS
        elif kind == _UUID:
            out[shown] = _uuid(value, attr, walk)
        elif kind == _RECORDS:
            out[shown] = render_batches(value) if isinstance(value, Batches) else render_records(value, walk)
        elif kind == _PLAINS:
            out[shown] = list(value)
        elif kind == _TOPICS:
            walk.topics.update(value)
            out[shown] = list(value)
        elif kind == _DATETIME:
            out[shown] = (value - _EPOCH) // _MS
        elif kind == _BYTES:
            out[shown] = render_bytes(value)
        else:  # _UUIDS
            out[shown] = [_uuid(item, attr, walk) for item in value]
    return out


def _uuid(value: uuid.UUID, attr: str, walk: Walk) -> str:
    if walk.resolve_topic is not None and attr == "topic_id" and value.int:
        name = walk.resolve_topic(value)
        if name is not None:
            walk.topics.add(name)
    return kafka_uuid(value)


def render_bytes(value: bytes) -> dict[str, Any]:
    if len(value) <= MAX_BYTES_SHOWN:
        return {"size": len(value), "base64": base64.b64encode(value).decode()}
    return {"size": len(value)}


def _blob(value: bytes | None) -> str | dict[str, str] | None:
    """Text when `value` is printable UTF-8, else {"base64": ...}; None stays null."""
    if value is None:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and (text.isprintable() or all(c.isprintable() or c in _WHITESPACE for c in text)):
        return text
    return {"base64": base64.b64encode(value).decode()}


def batch_summary(header: BatchHeader, position: int) -> dict[str, Any]:
    """One batch as kafka-dump-log.sh prints its batch line, by the same names."""
    timestamp_type = "LogAppendTime" if header.log_append_time else "CreateTime"
    return {
        "baseOffset": header.base_offset, "lastOffset": header.last_offset, "count": header.records_count,
        "baseSequence": header.base_sequence, "lastSequence": header.last_sequence,
        "producerId": header.producer_id, "producerEpoch": header.producer_epoch,
        "partitionLeaderEpoch": header.partition_leader_epoch, "isTransactional": header.is_transactional,
        "isControl": header.is_control,
        # Kafka 3.1+ (KIP-534): a cleaned batch's base timestamp is when its tombstones may go.
        "deleteHorizonMs": header.base_timestamp if header.attributes & _DELETE_HORIZON_FLAG else None,
        "position": position, "timestampType": timestamp_type,
        "baseTimestamp": header.base_timestamp, "maxTimestamp": header.max_timestamp, "size": header.size,
        "magic": header.magic, "compresscodec": _CODEC_NAMES.get(header.compression, str(header.compression)),
        "crc": header.crc,
    }


def render_batches(batches: Batches) -> dict[str, Any]:
    """What Batches kept, as render_records shows it."""
    shown: list[dict[str, Any]] = []
    out: dict[str, Any] = {"sizeInBytes": batches.size, "batches": shown}
    for position, header_bytes in batches.headers:
        try:
            header = BatchHeader.parse_header_only(header_bytes)
        except KafkaError as exc:
            out["unreadable"] = f"at byte {position}: {exc}"
            return out
        if position + header.size > batches.size:
            break
        shown.append(batch_summary(header, position))
    if batches.not_shown:
        out["batchesNotShown"] = batches.not_shown
    if batches.partial:
        out["partialBytes"] = batches.partial
    return out


def render_records(records: bytes | bytearray | memoryview | FileRegion, walk: Walk) -> dict[str, Any]:
    """{"sizeInBytes", "batches": [...]} from the batch headers; see the module docstring."""
    if isinstance(records, FileRegion):
        if not walk.decode_records:
            return render_batches(Batches(records, walk))
        records = records.read()
    size = len(records)
    batches: list[dict[str, Any]] = []
    out: dict[str, Any] = {"sizeInBytes": size, "batches": batches}
    position = 0
    not_shown = 0
    while size - position >= HEADER_SIZE:
        try:
            header = BatchHeader.parse_header_only(records, position)
        except KafkaError as exc:
            out["unreadable"] = f"at byte {position}: {exc}"
            return out
        if position + header.size > size:
            break  # a fetch may end in part of a batch, which clients drop
        if walk.decode_records:
            batches.append(_decoded_batch(records, position, header))
        elif walk.batch_budget > 0:
            walk.batch_budget -= 1
            batches.append(batch_summary(header, position))
        else:
            not_shown += 1
        position += header.size
    if not_shown:
        out["batchesNotShown"] = not_shown
    if position < size:
        out["partialBytes"] = size - position
    return out


def _decoded_batch(records: bytes | bytearray | memoryview, position: int, header: BatchHeader) -> dict[str, Any]:
    summary = batch_summary(header, position)
    try:
        decoded = decode_batch(records, position)
    except KafkaError as exc:
        summary["undecodable"] = str(exc)
        return summary
    control = bool(header.attributes & CONTROL_FLAG)
    shown = []
    for record in decoded.records:
        delta = record.offset - header.base_offset
        sequence = -1 if header.base_sequence < 0 else (header.base_sequence + delta) & 0x7FFFFFFF
        entry: dict[str, Any] = {"offset": record.offset, "timestamp": record.timestamp, "sequence": sequence}
        if control:
            try:
                control_type, coordinator_epoch = parse_control_record(record)
                entry["endTxnMarker"] = control_type.name
                entry["coordinatorEpoch"] = coordinator_epoch
            except (KafkaError, ValueError):
                entry["endTxnMarker"] = "UNKNOWN"
                entry["key"] = _blob(record.key)
        else:
            entry["key"] = _blob(record.key)
            entry["value"] = _blob(record.value)
            entry["headers"] = [{"key": name, "value": _blob(value)} for name, value in record.headers]
        shown.append(entry)
    summary["records"] = shown
    return summary

