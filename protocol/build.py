"""Version-tolerant construction of kio entities.

kio has one class per API version. Handlers describe a response once, with plain Python values, and
`build` keeps the fields the version has, converts ints to kio's typed values (timedelta,
datetime, ErrorCode) and fills the fields the handler did not name with Kafka's zero values.
"""

from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from collections.abc import Callable
from functools import cache
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode

T = TypeVar("T")

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    kafka_type: str | None
    element: type | None  # entity class for arrays / nested entities
    is_array: bool
    optional: bool
    default: Any


def _unwrap_optional(hint: Any) -> tuple[Any, bool]:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, getattr(__import__("types"), "UnionType", None)) and type(
        None
    ) in args:
        rest = [a for a in args if a is not type(None)]
        return rest[0], True
    return hint, False


@cache
def _specs(cls: type) -> tuple[_FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        hint, optional = _unwrap_optional(hints[f.name])
        is_array = typing.get_origin(hint) is tuple
        inner = typing.get_args(hint)[0] if is_array else hint
        element = inner if isinstance(inner, type) and dataclasses.is_dataclass(inner) else None
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = dataclasses.MISSING
        specs.append(
            _FieldSpec(f.name, f.metadata.get("kafka_type"), element, is_array, optional, default)
        )
    return tuple(specs)


def _zero(spec: _FieldSpec) -> Any:
    if spec.is_array:
        return ()
    if spec.optional:
        return None
    kafka_type = spec.kafka_type
    if kafka_type in ("int8", "int16", "int32", "int64", "uint16", "uint32", "float64"):
        return 0
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return ZERO_UUID
    if kafka_type == "error_code":
        return ErrorCode.none
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return datetime.timedelta(0)
    if kafka_type == "datetime_i64":
        return _EPOCH
    if spec.element is not None:
        return build(spec.element)
    raise TypeError(f"no zero value for field {spec.name} ({kafka_type})")


# --- the per-class plan `build` runs ------------------------------------------------------------
# Every response goes through `build`, often with nested entities, so each class's fields are
# worked out once: which need converting (and by which function), and the zero values to fill in.


def _entities(element: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return tuple(v if type(v) is not dict and dataclasses.is_dataclass(v) else build(element, **v)
                     for v in value)
    return convert


def _entity(element: type) -> Callable[[Any], Any]:
    def convert(value: Any) -> Any:
        return build(element, **value) if isinstance(value, dict) else value
    return convert


def _error_code(value: Any) -> Any:
    return value if isinstance(value, ErrorCode) else ErrorCode(int(value))


_ZERO_DELTA = datetime.timedelta(0)
_NO_TIMESTAMP = _EPOCH + datetime.timedelta(milliseconds=-1)  # -1: most responses' "none" (log_append_time)


def _timedelta(value: Any) -> Any:
    if isinstance(value, int):
        return _ZERO_DELTA if value == 0 else datetime.timedelta(milliseconds=value)
    return value


def _datetime(value: Any) -> Any:
    if isinstance(value, int):
        return _NO_TIMESTAMP if value == -1 else _EPOCH + datetime.timedelta(milliseconds=value)
    return value


def _converter(spec: _FieldSpec) -> Callable[[Any], Any] | None:
    """How a given value becomes the field's: entities from dicts, ErrorCode from ints, ms to
    timedelta/datetime, arrays to tuples; None where the value is kept as it is."""
    if spec.is_array:
        return _entities(spec.element) if spec.element is not None else tuple
    if spec.element is not None:
        return _entity(spec.element)
    if spec.kafka_type == "error_code":
        return _error_code
    if spec.kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _timedelta
    if spec.kafka_type == "datetime_i64":
        return _datetime
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    converters: dict[str, Callable[[Any], Any] | None]  # every field of the class
    zeros: dict[str, Any]  # the fields without a class default, at their zero values
    no_zero: frozenset[str]  # fields without a class default nor a zero value: must be given


@cache
def _plan(cls: type) -> _Plan:
    converters: dict[str, Callable[[Any], Any] | None] = {}
    zeros: dict[str, Any] = {}
    no_zero = set()
    for spec in _specs(cls):
        converters[spec.name] = _converter(spec)
        if spec.default is not dataclasses.MISSING:
            continue
        try:
            # kio entities are frozen, so one zero entity can be shared by every response
            zeros[spec.name] = _zero(spec)
        except TypeError:
            no_zero.add(spec.name)
    return _Plan(converters, zeros, frozenset(no_zero))


def build(cls: type[T], **values: Any) -> T:
    """Construct `cls`, ignoring fields this version lacks and zero-filling those not given.

    Nested entities may be given as dicts; arrays of entities as lists of dicts.
    """
    plan = _plan(cls)  # type: ignore[arg-type]  # classes hash by identity
    if plan.no_zero and not plan.no_zero <= values.keys():
        missing = plan.no_zero - values.keys()
        _zero(next(spec for spec in _specs(cls) if spec.name in missing))  # type: ignore[arg-type]  # raises
    kwargs = plan.zeros.copy()
    converters = plan.converters
    for name, value in values.items():
        if name in converters:
            convert = converters[name]
            kwargs[name] = value if convert is None or value is None else convert(value)
    return cls(**kwargs)


def nested(cls: type, field_name: str) -> type:
    """The entity class of `field_name` (array element or nested struct) in `cls`."""
    for spec in _specs(cls):
        if spec.name == field_name and spec.element is not None:
            return spec.element
    raise KeyError(f"{cls.__name__}.{field_name} is not an entity field")


def has_field(cls: type, field_name: str) -> bool:
    return any(spec.name == field_name for spec in _specs(cls))


def ms(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """Milliseconds of a kio timedelta/datetime field (ints pass through)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return value // datetime.timedelta(milliseconds=1)
    if isinstance(value, datetime.datetime):
        return (value - _EPOCH) // datetime.timedelta(milliseconds=1)
    return int(value)
