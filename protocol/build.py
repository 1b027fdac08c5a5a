"""Version-tolerant construction of kio entities.

kio has one class per API version. Handlers describe a response once, with plain Python values, and
`build` keeps the fields the version has, converts ints to kio's typed values (timedelta,
datetime, ErrorCode) and fills the fields the handler did not name with Kafka's zero values.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import types
import typing
import uuid
from collections.abc import Callable
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


@functools.cache
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


# --- the per-class constructor `build` runs -----------------------------------------------------
# Every response goes through `build`, often with nested entities. Each class gets a constructor compiled
# once from its fields: which values need converting (and by which function), the zero or default of
# each field not given. kio entities are frozen dataclasses with slots, whose generated __init__ sets each
# field through object.__setattr__; the compiled constructor sets the slots through their descriptors
# instead, about half the cost (a Produce answer builds three entities per partition).

Maker = Callable[[dict[str, Any]], Any]


def _entities(element: type) -> Callable[[Any], Any]:
    make = _maker(element)

    def convert(value: Any) -> Any:
        # Most arrays an answer is built with are empty or already entities of this class: those skip the
        # generator and dataclasses.is_dataclass (an empty one 0.33 -> 0.06 us, one entity 0.93 -> 0.53).
        if not value:
            return ()
        return tuple([make(v) if type(v) is dict else v if type(v) is element or dataclasses.is_dataclass(v)
                      else make(dict(v)) for v in value])
    return convert


def _entity(element: type) -> Callable[[Any], Any]:
    make = _maker(element)

    def convert(value: Any) -> Any:
        return make(value) if isinstance(value, dict) else value
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


@functools.cache
def _maker(cls: type) -> Maker:
    """`cls` from a dict of field values: names the class lacks are ignored, a given None is kept as it is,
    a field not given takes the class default, else its zero; one without either must be given."""
    names: dict[str, Any] = {"_MISSING": dataclasses.MISSING, "_cls": cls, "_new": object.__new__}
    specs = _specs(cls)
    # Every field a slot of the class itself (kio's are); otherwise the class's own constructor is called.
    slotted = all(isinstance(cls.__dict__.get(spec.name), types.MemberDescriptorType) for spec in specs)
    lines = ["def make(values):", "    get = values.get"]
    if slotted:
        lines.append("    obj = _new(_cls)")
    for index, spec in enumerate(specs):
        value = f"_v{index}"
        has_default = True
        if spec.default is not dataclasses.MISSING:
            names[f"_default{index}"] = spec.default
        else:
            try:
                # kio entities are frozen, so one zero entity can be shared by every response
                names[f"_default{index}"] = _zero(spec)
            except TypeError:
                has_default = False
                names[f"_require{index}"] = functools.partial(_zero, spec)  # raises the TypeError
        convert = _converter(spec)
        if convert is None and has_default:
            lines.append(f"    {value} = get({spec.name!r}, _default{index})")
        else:
            lines.append(f"    {value} = get({spec.name!r}, _MISSING)")
            lines.append(f"    if {value} is _MISSING:")
            lines.append(f"        {value} = _default{index}" if has_default else f"        _require{index}()")
            if convert is not None:
                names[f"_convert{index}"] = convert
                lines.append(f"    elif {value} is not None:")
                lines.append(f"        {value} = _convert{index}({value})")
        if slotted:
            names[f"_set{index}"] = cls.__dict__[spec.name].__set__
            lines.append(f"    _set{index}(obj, {value})")
    if slotted:
        lines.append("    return obj")
    else:
        lines.append("    return _cls(" + ", ".join(f"{spec.name}=_v{index}" for index, spec in enumerate(specs)) + ")")
    exec(compile("\n".join(lines), f"<minikafka maker {cls.__module__}.{cls.__qualname__}>", "exec"), names)
    make: Maker = names["make"]
    return make


def prepare(cls: type) -> None:
    """Compile the maker of `cls` (and of the entities nested in it) now rather than in the first `build`."""
    _maker(cls)


def build(cls: type[T], **values: Any) -> T:
    """Construct `cls`, ignoring fields this version lacks and zero-filling those not given.

    Nested entities may be given as dicts; arrays of entities as lists of dicts.
    """
    result: T = _maker(cls)(values)  # type: ignore[arg-type]  # classes hash by identity
    return result


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
