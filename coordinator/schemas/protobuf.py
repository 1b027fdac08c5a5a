"""Protobuf as a schema registry format: .proto parsing, Confluent's canonical forms and its compatibility rules.

The text is .proto source, or the base64 of a compiled ``FileDescriptorProto`` (what confluent-kafka's
Python serializer registers; see protobuf_descriptor.py). The source is parsed by ``proto-schema-parser``
(an ANTLR grammar of the .proto language, no protoc) with its error recovery turned off, then checked as
protoc would check it where it matters to the registry:
the syntax, field numbers (range, reserved, duplicates), names, ``required`` only in proto2, map keys, and
every type name resolved through the file's scopes and its imports. Imports come from the references
(import path -> schema text), or are the files Confluent ships built in: Google's well-known types
(``google/protobuf/*.proto``), ``google/type/*.proto``, ``confluent/meta.proto`` and
``confluent/type/decimal.proto``.

Compatibility follows Confluent's Protobuf rules (docs.confluent.io "Schema Evolution and Compatibility",
https://yokota.blog/2021/08/26/understanding-protobuf-compatibility/, and the behaviour of Confluent's
checker): the old schema is the writer, the new one the reader; messages are matched by name and fields by
number, and a field's message type is compared through to the referenced message (also across references).
Each difference has one of Confluent's types; only those Confluent counts as incompatible are reported
(``PACKAGE_CHANGED``, ``MESSAGE_REMOVED``, ``FIELD_KIND_CHANGED``, ``FIELD_SCALAR_KIND_CHANGED``,
``FIELD_NAMED_TYPE_CHANGED``, ``FIELD_NUMERIC_LABEL_CHANGED``, ``REQUIRED_FIELD_ADDED``,
``REQUIRED_FIELD_REMOVED``, ``ONEOF_FIELD_REMOVED``, ``MULTIPLE_FIELDS_MOVED_TO_ONEOF``,
``FIELD_MOVED_TO_EXISTING_ONEOF``). Scalars whose wire encodings agree stay compatible:
int32/int64/uint32/uint64/bool and enums, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64, string/bytes.
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from antlr4.error.ErrorListener import ErrorListener
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.protobuf_descriptor import (
    compile_file,
    looks_serialized,
    serialized,
    text_of_serialized,
)
from proto_schema_parser import ast
from proto_schema_parser.parser import Parser

MAX_FIELD_NUMBER = 536_870_911
_RESERVED_BY_PROTOBUF = range(19_000, 20_000)

# Imports deeper than this are refused (a chain of references importing each other).
MAX_IMPORT_DEPTH = 32

# Parsed schemas kept by (text, references): parsing is CPU-bound (the ANTLR parser is pure Python, tens
# of milliseconds for a small file), and a registry parses the same versions again for transitive checks.
PARSE_CACHE_SIZE = 256

_SCALAR_ENCODINGS = {
    "int32": "varint", "int64": "varint", "uint32": "varint", "uint64": "varint", "bool": "varint",
    "sint32": "zigzag", "sint64": "zigzag", "fixed32": "fixed32", "sfixed32": "fixed32",
    "fixed64": "fixed64", "sfixed64": "fixed64", "float": "float", "double": "double",
    "string": "length", "bytes": "length",
}
_MAP_KEYS = frozenset(_SCALAR_ENCODINGS) - {"float", "double", "bytes"}

# Confluent's difference types that keep a reader on the new schema able to read data of the old one.
COMPATIBLE_CHANGES = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED",
    "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED",
    "FIELD_NAME_CHANGED", "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED",
    "ONEOF_FIELD_ADDED",
})

# The descriptions name the new schema the reader's and the old one the writer's, as Confluent's do.
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at path '{path}' differs between the writer and the reader schema",
    "MESSAGE_REMOVED": "The message at path '{path}' in the writer schema is missing from the reader schema",
    "FIELD_KIND_CHANGED": "The field at path '{path}' changed kind (scalar, message or map) in the reader schema",
    "FIELD_SCALAR_KIND_CHANGED": "The scalar field at path '{path}' has a type of another wire encoding in the "
                                 "reader schema",
    "FIELD_NAMED_TYPE_CHANGED": "The message type of the field at path '{path}' changed in the reader schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label of the numeric field at path '{path}' changed in the reader schema",
    "REQUIRED_FIELD_ADDED": "The reader schema has a new required field at path '{path}'",
    "REQUIRED_FIELD_REMOVED": "The required field at path '{path}' in the writer schema is missing from the "
                              "reader schema",
    "ONEOF_FIELD_REMOVED": "The oneof field at path '{path}' in the writer schema is missing from the reader schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Several fields moved into the oneof at path '{path}' in the reader schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field moved into the oneof at path '{path}', which already had fields of "
                                     "the writer schema",
}

_WELL_KNOWN = "google.protobuf"
# Files Confluent resolves without a reference: path -> (package, the types they define).
BUILTIN_FILES: dict[str, tuple[str, tuple[str, ...]]] = {
    "google/protobuf/any.proto": (_WELL_KNOWN, ("Any",)),
    "google/protobuf/api.proto": (_WELL_KNOWN, ("Api", "Method", "Mixin")),
    "google/protobuf/descriptor.proto": (_WELL_KNOWN, (
        "Edition", "SymbolVisibility", "FileDescriptorSet", "FileDescriptorProto", "DescriptorProto",
        "DescriptorProto.ExtensionRange", "DescriptorProto.ReservedRange", "ExtensionRangeOptions",
        "ExtensionRangeOptions.VerificationState", "ExtensionRangeOptions.Declaration", "FieldDescriptorProto",
        "FieldDescriptorProto.Type", "FieldDescriptorProto.Label", "OneofDescriptorProto", "EnumDescriptorProto",
        "EnumDescriptorProto.EnumReservedRange", "EnumValueDescriptorProto", "ServiceDescriptorProto",
        "MethodDescriptorProto", "FileOptions", "FileOptions.OptimizeMode", "MessageOptions", "FieldOptions",
        "FieldOptions.CType", "FieldOptions.JSType", "FieldOptions.OptionRetention",
        "FieldOptions.OptionTargetType", "FieldOptions.EditionDefault", "FieldOptions.FeatureSupport",
        "OneofOptions", "EnumOptions", "EnumValueOptions", "ServiceOptions", "MethodOptions",
        "MethodOptions.IdempotencyLevel", "UninterpretedOption", "UninterpretedOption.NamePart", "FeatureSet",
        "FeatureSetDefaults", "SourceCodeInfo", "SourceCodeInfo.Location", "GeneratedCodeInfo",
        "GeneratedCodeInfo.Annotation")),
    "google/protobuf/duration.proto": (_WELL_KNOWN, ("Duration",)),
    "google/protobuf/empty.proto": (_WELL_KNOWN, ("Empty",)),
    "google/protobuf/field_mask.proto": (_WELL_KNOWN, ("FieldMask",)),
    "google/protobuf/source_context.proto": (_WELL_KNOWN, ("SourceContext",)),
    "google/protobuf/struct.proto": (_WELL_KNOWN, ("NullValue", "Struct", "Value", "ListValue")),
    "google/protobuf/timestamp.proto": (_WELL_KNOWN, ("Timestamp",)),
    "google/protobuf/type.proto": (_WELL_KNOWN, (
        "Syntax", "Type", "Field", "Field.Kind", "Field.Cardinality", "Enum", "EnumValue", "Option")),
    "google/protobuf/wrappers.proto": (_WELL_KNOWN, (
        "DoubleValue", "FloatValue", "Int64Value", "UInt64Value", "Int32Value", "UInt32Value", "BoolValue",
        "StringValue", "BytesValue")),
    "google/type/calendar_period.proto": ("google.type", ("CalendarPeriod",)),
    "google/type/color.proto": ("google.type", ("Color",)),
    "google/type/date.proto": ("google.type", ("Date",)),
    "google/type/datetime.proto": ("google.type", ("DateTime", "TimeZone")),
    "google/type/dayofweek.proto": ("google.type", ("DayOfWeek",)),
    "google/type/decimal.proto": ("google.type", ("Decimal",)),
    "google/type/expr.proto": ("google.type", ("Expr",)),
    "google/type/fraction.proto": ("google.type", ("Fraction",)),
    "google/type/interval.proto": ("google.type", ("Interval",)),
    "google/type/latlng.proto": ("google.type", ("LatLng",)),
    "google/type/localized_text.proto": ("google.type", ("LocalizedText",)),
    "google/type/money.proto": ("google.type", ("Money",)),
    "google/type/month.proto": ("google.type", ("Month",)),
    "google/type/phone_number.proto": ("google.type", ("PhoneNumber", "PhoneNumber.ShortCode")),
    "google/type/postal_address.proto": ("google.type", ("PostalAddress",)),
    "google/type/quaternion.proto": ("google.type", ("Quaternion",)),
    "google/type/timeofday.proto": ("google.type", ("TimeOfDay",)),
    "confluent/meta.proto": ("confluent", ("Meta",)),
    "confluent/type/decimal.proto": ("confluent.type", ("Decimal",)),
}
# Enums among the built-in types (the others are messages).
_BUILTIN_ENUMS = frozenset({
    "google.protobuf.Edition", "google.protobuf.SymbolVisibility", "google.protobuf.NullValue",
    "google.protobuf.Syntax", "google.protobuf.Field.Kind", "google.protobuf.Field.Cardinality",
    "google.protobuf.FieldDescriptorProto.Type", "google.protobuf.FieldDescriptorProto.Label",
    "google.protobuf.FileOptions.OptimizeMode", "google.protobuf.FieldOptions.CType",
    "google.protobuf.FieldOptions.JSType", "google.protobuf.FieldOptions.OptionRetention",
    "google.protobuf.FieldOptions.OptionTargetType", "google.protobuf.MethodOptions.IdempotencyLevel",
    "google.protobuf.ExtensionRangeOptions.VerificationState", "google.type.CalendarPeriod",
    "google.type.DayOfWeek", "google.type.Month",
})


@dataclass(frozen=True)
class Difference:
    """One difference between an old (writer's) and a new (reader's) schema, by Confluent's type."""

    kind: str
    path: str

    @property
    def compatible(self) -> bool:
        return self.kind in COMPATIBLE_CHANGES

    def message(self) -> str:
        template = _DESCRIPTIONS.get(self.kind, "The reader schema differs at path '{path}' ({kind})")
        return f'{{errorType:"{self.kind}", description:"{template.format(path=self.path, kind=self.kind)}"}}'


@dataclass(frozen=True)
class FieldModel:
    """A message field as compatibility sees it: its type resolved to a full name (``.pkg.Msg``) or a scalar."""

    name: str
    number: int
    kind: str  # "scalar", "enum", "message" or "map"
    type: str  # the scalar's name, the full name of the enum or message, or "map<key,value>"
    label: str  # "", "optional", "required" or "repeated"
    oneof: str | None
    key_type: str = ""
    value_kind: str = ""


@dataclass
class MessageModel:
    fields: dict[int, FieldModel] = field(default_factory=dict)
    oneofs: dict[str, set[int]] = field(default_factory=dict)


@dataclass
class FileModel:
    """What of a .proto file compatibility compares: its types by name relative to the package, and the
    messages of the file and of everything it imports by full name (a field's type is compared through them)."""

    syntax: str
    package: str
    messages: dict[str, MessageModel] = field(default_factory=dict)
    enums: dict[str, dict[str, int]] = field(default_factory=dict)
    types: dict[str, MessageModel] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)  # full name of every known type -> its package


class ProtobufSchema:
    """A parsed .proto file: its canonical and normalized texts and its compatibility against an older one."""

    def __init__(self, model: FileModel, canonical: str, normalized: str, descriptor: str) -> None:
        self.model = model
        self.canonical = canonical
        self._normalized = normalized
        self._descriptor = descriptor

    def serialized(self) -> str:
        """The base64 ``FileDescriptorProto`` of the schema: Confluent's ``format=serialized`` form, the one
        confluent-kafka's Python serializer registers and its deserializer asks for."""
        return self._descriptor

    def normalized(self) -> str:
        """Confluent's ``normalize=true`` form: imports and options sorted, type names fully qualified."""
        return self._normalized

    def differences(self, old: ProtobufSchema) -> list[Difference]:
        """Every difference from ``old`` (the writer's schema) to this one (the reader's)."""
        return _compare_files(old.model, self.model)

    def incompatibilities(self, old: Any) -> list[str]:
        """Confluent's messages for the changes that stop this schema reading data written with ``old``."""
        if not isinstance(old, ProtobufSchema):
            return ['{errorType:"FIELD_KIND_CHANGED", description:"The writer schema is not a Protobuf schema"}']
        return [difference.message() for difference in self.differences(old) if not difference.compatible]

    def __repr__(self) -> str:
        return f"ProtobufSchema({self.canonical[:80]!r})"


class ProtobufFormat:
    """The registry's ``PROTOBUF`` schema type."""

    name = "PROTOBUF"

    def parse(self, text: str, references: Mapping[str, str]) -> ProtobufSchema:
        try:
            key = (text, tuple(sorted(references.items())))
            hash(key)
        except Exception:
            return _parse_guarded(text, references)  # odd input (not strings): nothing to cache by
        return _parse_cached(*key)


@functools.lru_cache(maxsize=PARSE_CACHE_SIZE)
def _parse_cached(text: str, references: tuple[tuple[str, str], ...]) -> ProtobufSchema:
    return _parse_guarded(text, dict(references))


def _parse_guarded(text: str, references: Mapping[str, str]) -> ProtobufSchema:
    try:
        return _parse_schema(text, references)
    except InvalidSchema:
        raise
    except (RecursionError, MemoryError) as error:
        raise InvalidSchema(f"Invalid Protobuf schema: too deeply nested ({type(error).__name__})") from error
    except Exception as error:
        # The ANTLR runtime and the AST builder raise many kinds of errors on strange input.
        raise InvalidSchema(f"Invalid Protobuf schema: {type(error).__name__}: {error}") from error


PROTOBUF_FORMAT = ProtobufFormat()


class _RaisingErrorListener(ErrorListener):
    """Turns the first lexer or parser error into InvalidSchema instead of ANTLR's recovery and stderr print."""

    def __init__(self, what: str) -> None:
        self.what = what

    def syntaxError(self, recognizer: Any, offendingSymbol: Any, line: int, column: int, msg: str,
                    e: Any) -> None:
        raise InvalidSchema(f"Invalid Protobuf schema in {self.what}: line {line}:{column} {msg}")


def _syntax_tree(text: str, what: str) -> ast.File:
    if not isinstance(text, str):
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: the schema must be a string")
    if not text.strip():
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: the schema is empty")
    if looks_serialized(text):
        text = text_of_serialized(text, what)
    listener = _RaisingErrorListener(what)

    def strict(recognizer: Any) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(listener)

    return Parser(setup_lexer=strict, setup_parser=strict).parse(text)


# Building the model: scopes, type resolution and protoc's checks.


@dataclass
class _File:
    tree: ast.File
    package: str
    symbols: dict[str, str]  # full name without the leading dot -> "message" or "enum"


@dataclass
class _Loaded:
    """A file with everything it imports: its types' kinds, packages and message models, by full name."""

    symbols: dict[str, str] = field(default_factory=dict)
    packages: dict[str, str] = field(default_factory=dict)
    messages: dict[str, MessageModel] = field(default_factory=dict)

    def add(self, other: _Loaded) -> None:
        self.symbols.update(other.symbols)
        self.packages.update(other.packages)
        self.messages.update(other.messages)


@dataclass
class _Loader:
    references: Mapping[str, str]
    loaded: dict[str, _Loaded] = field(default_factory=dict)

    def load(self, path: str, depth: int, loading: tuple[str, ...]) -> _Loaded:
        if depth > MAX_IMPORT_DEPTH:
            raise InvalidSchema(f"Invalid Protobuf schema: imports nested deeper than {MAX_IMPORT_DEPTH}")
        if path in self.loaded:
            return self.loaded[path]
        if path in loading:
            raise InvalidSchema(f"Invalid Protobuf schema: import cycle through {path!r}")
        if path in self.references:
            tree = _syntax_tree(self.references[path], f"reference {path!r}")
            model, loaded = _model(tree, self, depth, (*loading, path), f"reference {path!r}")
            loaded.messages.update(model.types)
        elif path in BUILTIN_FILES:
            package, names = BUILTIN_FILES[path]
            loaded = _Loaded()
            for name in names:
                full_name = f"{package}.{name}"
                loaded.symbols[full_name] = "enum" if full_name in _BUILTIN_ENUMS else "message"
                loaded.packages[full_name] = package
        else:
            raise InvalidSchema(f"Invalid Protobuf schema: import {path!r} is neither a reference nor built in")
        self.loaded[path] = loaded
        return loaded


def _imports(tree: ast.File) -> list[str]:
    return [element.name for element in tree.file_elements if isinstance(element, ast.Import)]


def _local_file(tree: ast.File, what: str) -> _File:
    syntax = tree.syntax
    if syntax is not None and syntax not in ("proto2", "proto3"):
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: unknown syntax {syntax!r}")
    packages = [element.name for element in tree.file_elements if isinstance(element, ast.Package)]
    if len(packages) > 1:
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: more than one package statement")
    package = packages[0] if packages else ""
    symbols: dict[str, str] = {}
    prefix = f"{package}." if package else ""
    _collect_symbols(tree.file_elements, prefix, symbols, what)
    return _File(tree, package, symbols)


def _collect_symbols(elements: Iterable[Any], prefix: str, symbols: dict[str, str], what: str) -> None:
    for element in elements:
        if isinstance(element, ast.Message | ast.Group):
            name = element.name
            _define(symbols, prefix + name, "message", what)
            _collect_symbols(element.elements, f"{prefix}{name}.", symbols, what)
        elif isinstance(element, ast.Enum):
            _define(symbols, prefix + element.name, "enum", what)
        elif isinstance(element, ast.OneOf):
            _collect_symbols(element.elements, prefix, symbols, what)


def _define(symbols: dict[str, str], full_name: str, kind: str, what: str) -> None:
    if full_name in symbols:
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: {full_name!r} is already defined")
    symbols[full_name] = kind


def _resolve(type_name: str, scope: str, symbols: Mapping[str, str], what: str) -> tuple[str, str]:
    """A type name as written in ``scope`` -> its full name and kind, by protobuf's scoping rules."""
    if type_name.startswith("."):
        if type_name[1:] in symbols:
            return type_name[1:], symbols[type_name[1:]]
    else:
        parts = scope.split(".") if scope else []
        for end in range(len(parts), -1, -1):
            candidate = ".".join([*parts[:end], type_name])
            if candidate in symbols:
                return candidate, symbols[candidate]
    raise InvalidSchema(f"Invalid Protobuf schema in {what}: type {type_name!r} is not defined (in {scope or 'file'})")


def _parse_schema(text: str, references: Mapping[str, str]) -> ProtobufSchema:
    tree = _syntax_tree(text, "the schema")
    qualified = copy.deepcopy(tree)
    model, visible = _model(qualified, _Loader(references), 0, (), "the schema")
    descriptor = serialized(compile_file(qualified, visible.symbols))
    return ProtobufSchema(model, _print_file(tree, normalize=False), _print_file(qualified, normalize=True),
                          descriptor)


def _model(tree: ast.File, loader: _Loader, depth: int, loading: tuple[str, ...],
           what: str) -> tuple[FileModel, _Loaded]:
    """A file's model, its type names qualified in place, and what it can see (itself and its imports)."""
    local = _local_file(tree, what)
    visible = _Loaded(dict(local.symbols), dict.fromkeys(local.symbols, local.package))
    for imported in _imports(tree):
        visible.add(loader.load(imported, depth + 1, loading))
    model = FileModel(syntax=tree.syntax or "proto2", package=local.package)
    prefix = f"{local.package}." if local.package else ""
    _build(tree.file_elements, local.package, prefix, "", model, visible.symbols, what)
    model.types = {**visible.messages, **{prefix + name: message for name, message in model.messages.items()}}
    model.packages = visible.packages
    return model, visible


def _build(elements: list[Any], scope: str, prefix: str, relative: str, model: FileModel,
           symbols: Mapping[str, str], what: str) -> None:
    """Fills ``model`` from the elements of a file or message, qualifying their type names in place."""
    for element in elements:
        if isinstance(element, ast.Message | ast.Group):
            name = f"{relative}{element.name}"
            inner_scope = f"{scope}.{element.name}" if scope else element.name
            model.messages[name] = _message_model(element, inner_scope, model.syntax, symbols, what)
            _build(element.elements, inner_scope, prefix, f"{name}.", model, symbols, what)
        elif isinstance(element, ast.Enum):
            model.enums[f"{relative}{element.name}"] = _enum_model(element, model.syntax, what)
        elif isinstance(element, ast.OneOf):
            groups = [member for member in element.elements if isinstance(member, ast.Group)]
            _build(groups, scope, prefix, relative, model, symbols, what)
        elif isinstance(element, ast.Extension):
            for extension_field in element.elements:
                if isinstance(extension_field, ast.Field):
                    _qualify_field(extension_field, scope, symbols, what)
        elif isinstance(element, ast.Service):
            for method in element.elements:
                if isinstance(method, ast.Method):
                    for message_type in (method.input_type, method.output_type):
                        full, _ = _resolve(message_type.type, scope, symbols, what)
                        message_type.type = f".{full}"


def _qualify_field(field_element: ast.Field, scope: str, symbols: Mapping[str, str], what: str) -> tuple[str, str]:
    if field_element.type in _SCALAR_ENCODINGS:
        return field_element.type, "scalar"
    full, kind = _resolve(field_element.type, scope, symbols, what)
    field_element.type = f".{full}"
    return field_element.type, kind


def _fields_of(message: ast.Message | ast.Group) -> Iterator[tuple[Any, str | None]]:
    for element in message.elements:
        if isinstance(element, ast.OneOf):
            yield from ((member, element.name) for member in element.elements
                        if isinstance(member, ast.Field | ast.Group))
        elif isinstance(element, ast.Field | ast.MapField | ast.Group):
            yield element, None


def _message_model(message: ast.Message | ast.Group, scope: str, syntax: str, symbols: Mapping[str, str],
                   what: str) -> MessageModel:
    model = MessageModel()
    reserved_numbers, reserved_names = _reserved(message.elements, what)
    names: set[str] = set()
    for element, oneof in _fields_of(message):
        where = f"{what}, field {scope}.{element.name}"
        _check_number(element.number, reserved_numbers, where)
        if element.number in model.fields:
            raise InvalidSchema(f"Invalid Protobuf schema in {where}: number {element.number} is already used")
        if element.name in names or element.name in reserved_names:
            raise InvalidSchema(f"Invalid Protobuf schema in {where}: the name is already used or reserved")
        names.add(element.name)
        model.fields[element.number] = _field_model(element, oneof, scope, syntax, symbols, where)
        if oneof is not None:
            model.oneofs.setdefault(oneof, set()).add(element.number)
    return model


def _field_model(element: Any, oneof: str | None, scope: str, syntax: str, symbols: Mapping[str, str],
                 where: str) -> FieldModel:
    if isinstance(element, ast.MapField):
        if element.key_type not in _MAP_KEYS:
            raise InvalidSchema(f"Invalid Protobuf schema in {where}: map keys cannot be {element.key_type!r}")
        value = ast.Field(name=element.name, number=element.number, type=element.value_type)
        value_type, value_kind = _qualify_field(value, scope, symbols, where)
        element.value_type = value.type
        return FieldModel(element.name, element.number, "map", f"map<{element.key_type},{value_type}>", "repeated",
                          oneof, element.key_type, value_kind)
    label = element.cardinality.value.lower() if element.cardinality is not None else ""
    if label == "required" and syntax == "proto3":
        raise InvalidSchema(f"Invalid Protobuf schema in {where}: required fields are not allowed in proto3")
    if isinstance(element, ast.Group):
        if syntax == "proto3":
            raise InvalidSchema(f"Invalid Protobuf schema in {where}: groups are not allowed in proto3")
        return FieldModel(element.name.lower(), element.number, "message", f".{scope}.{element.name}", label, oneof)
    type_name, kind = _qualify_field(element, scope, symbols, where)
    return FieldModel(element.name, element.number, kind, type_name, label, oneof)


def _check_number(number: int, reserved: list[tuple[int, int]], where: str) -> None:
    if not 1 <= number <= MAX_FIELD_NUMBER:
        raise InvalidSchema(f"Invalid Protobuf schema in {where}: field number {number} is out of range")
    if number in _RESERVED_BY_PROTOBUF:
        raise InvalidSchema(f"Invalid Protobuf schema in {where}: field numbers 19000-19999 are reserved")
    if any(low <= number <= high for low, high in reserved):
        raise InvalidSchema(f"Invalid Protobuf schema in {where}: field number {number} is reserved")


_RANGE = re.compile(r"^\s*(-?\d+)\s*(?:to\s*(-?\d+|max)\s*)?$")


def _reserved(elements: Iterable[Any], what: str) -> tuple[list[tuple[int, int]], set[str]]:
    ranges: list[tuple[int, int]] = []
    names: set[str] = set()
    for element in elements:
        if isinstance(element, ast.Reserved | ast.EnumReserved):
            names.update(element.names)
            for text in element.ranges:
                match = _RANGE.match(str(text))
                if match is None:
                    raise InvalidSchema(f"Invalid Protobuf schema in {what}: bad reserved range {text!r}")
                low = int(match.group(1), 0)
                high = low if match.group(2) is None else (
                    MAX_FIELD_NUMBER if match.group(2) == "max" else int(match.group(2), 0))
                ranges.append((low, high))
    return ranges, names


def _enum_model(enum: ast.Enum, syntax: str, what: str) -> dict[str, int]:
    values = {element.name: element.number for element in enum.elements if isinstance(element, ast.EnumValue)}
    if not values:
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: enum {enum.name} has no values")
    first = next(element for element in enum.elements if isinstance(element, ast.EnumValue))
    if syntax == "proto3" and first.number != 0:
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: the first value of enum {enum.name} must be 0")
    if len(values) != sum(1 for element in enum.elements if isinstance(element, ast.EnumValue)):
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: enum {enum.name} repeats a value name")
    return values


# Compatibility.


class _Comparison:
    """Walks an old (writer's) and a new (reader's) file side by side, collecting Confluent's difference types."""

    def __init__(self, old: FileModel, new: FileModel) -> None:
        self.old, self.new = old, new
        # Message pairs being compared: a recursive type meets itself again and is assumed compatible there.
        self._active: set[tuple[str, str]] = set()

    def files(self) -> list[Difference]:
        old, new = self.old, self.new
        differences: list[Difference] = []
        if old.package != new.package:
            differences.append(Difference("PACKAGE_CHANGED", "#/"))
        removed, added = old.messages.keys() - new.messages.keys(), new.messages.keys() - old.messages.keys()
        differences += [Difference("MESSAGE_REMOVED", f"#/{name}") for name in removed]
        differences += [Difference("MESSAGE_ADDED", f"#/{name}") for name in added]
        differences += [Difference("ENUM_REMOVED", f"#/{name}") for name in old.enums.keys() - new.enums.keys()]
        differences += [Difference("ENUM_ADDED", f"#/{name}") for name in new.enums.keys() - old.enums.keys()]
        for name in sorted(old.enums.keys() & new.enums.keys()):
            differences += _compare_enums(old.enums[name], new.enums[name], f"#/{name}")
        for name in sorted(old.messages.keys() & new.messages.keys()):
            differences += self.messages(old.messages[name], new.messages[name], f"#/{name}")
        return sorted(set(differences), key=lambda d: (d.path, d.kind))

    def messages(self, old: MessageModel, new: MessageModel, path: str) -> list[Difference]:
        differences = _oneof_moves(old, new, path)
        for name in sorted(old.oneofs.keys() | new.oneofs.keys()):
            where = f"{path}/{name}"
            if name not in new.oneofs:
                differences.append(Difference("ONEOF_REMOVED", where))
            elif name not in old.oneofs:
                differences.append(Difference("ONEOF_ADDED", where))
            else:
                differences += self._oneof_members(old, new, name, where)
        old_plain = {number: f for number, f in old.fields.items() if f.oneof is None}
        new_plain = {number: f for number, f in new.fields.items() if f.oneof is None}
        moved_into_oneofs = {number for number, f in new.fields.items() if f.oneof is not None}
        for number in sorted(old_plain.keys() | new_plain.keys()):
            where = f"{path}/{number}"
            before, after = old_plain.get(number), new_plain.get(number)
            if after is None:
                assert before is not None
                if number not in moved_into_oneofs:
                    required = before.label == "required"
                    differences.append(Difference("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", where))
            elif before is None:
                required = after.label == "required"
                differences.append(Difference("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", where))
            else:
                differences += self.fields(before, after, where)
        # Fields that changed oneof (into, out of, or between oneofs) are still compared by number.
        for number in sorted(old.fields.keys() & new.fields.keys()):
            before, after = old.fields[number], new.fields[number]
            if before.oneof != after.oneof:
                differences += self.fields(before, after, f"{path}/{number}")
        return differences

    def _oneof_members(self, old: MessageModel, new: MessageModel, name: str, where: str) -> list[Difference]:
        differences: list[Difference] = []
        before, after = old.oneofs[name], new.oneofs[name]
        for number in sorted(before | after):
            if number not in after:
                # A field that left the oneof but lives on elsewhere in the message lost no data.
                if number not in new.fields:
                    differences.append(Difference("ONEOF_FIELD_REMOVED", f"{where}/{number}"))
            elif number not in before:
                differences.append(Difference("ONEOF_FIELD_ADDED", f"{where}/{number}"))
            else:
                differences += self.fields(old.fields[number], new.fields[number], f"{where}/{number}")
        return differences

    def fields(self, old: FieldModel, new: FieldModel, path: str) -> list[Difference]:
        differences = [Difference("FIELD_NAME_CHANGED", path)] if old.name != new.name else []
        labels = (old.label or None, new.label or None)
        return differences + self.types(old.kind, old.type, new.kind, new.type, labels, path, old, new)

    def types(self, old_kind: str, old_type: str, new_kind: str, new_type: str,
              labels: tuple[str | None, str | None], path: str, old: FieldModel | None = None,
              new: FieldModel | None = None) -> list[Difference]:
        if _kind(old_kind) != _kind(new_kind):
            return [Difference("FIELD_KIND_CHANGED", path)]
        if _kind(old_kind) == "scalar":
            return _compare_scalars(old_kind, old_type, new_kind, new_type, labels, path)
        if old_kind == "map":
            assert old is not None and new is not None
            return [*self.types("scalar", old.key_type, "scalar", new.key_type, (None, None), path),
                    *self.types(old.value_kind, _map_value(old), new.value_kind, _map_value(new), (None, None), path)]
        return self._message_types(old_type, new_type, path)

    def _message_types(self, old_type: str, new_type: str, path: str) -> list[Difference]:
        old_full, new_full = old_type.lstrip("."), new_type.lstrip(".")
        old_local = _local_name(old_full, self.old.packages.get(old_full, ""))
        new_local = _local_name(new_full, self.new.packages.get(new_full, ""))
        if old_local != new_local:
            return [Difference("FIELD_NAMED_TYPE_CHANGED", path)]
        old_message, new_message = self.old.types.get(old_full), self.new.types.get(new_full)
        if old_message is None or new_message is None or (old_full, new_full) in self._active:
            return []
        self._active.add((old_full, new_full))
        try:
            inner = self.messages(old_message, new_message, f"#/{old_local}")
        finally:
            self._active.discard((old_full, new_full))
        if any(not difference.compatible for difference in inner):
            inner.append(Difference("FIELD_NAMED_TYPE_CHANGED", path))
        return inner


def _compare_files(old: FileModel, new: FileModel) -> list[Difference]:
    return _Comparison(old, new).files()


def _oneof_moves(old: MessageModel, new: MessageModel, path: str) -> list[Difference]:
    """Fields that were plain in the old message and share a oneof in the new one: old data may set several."""
    differences: list[Difference] = []
    for name, numbers in sorted(new.oneofs.items()):
        moved = [n for n in numbers if n in old.fields and old.fields[n].oneof is None]
        from_oneofs = [n for n in numbers if n in old.fields and old.fields[n].oneof is not None]
        if len(moved) > 1:
            differences.append(Difference("MULTIPLE_FIELDS_MOVED_TO_ONEOF", f"{path}/{name}"))
        elif moved and from_oneofs:
            differences.append(Difference("FIELD_MOVED_TO_EXISTING_ONEOF", f"{path}/{name}"))
    return differences


def _compare_enums(old: dict[str, int], new: dict[str, int], path: str) -> list[Difference]:
    differences = [Difference("ENUM_CONST_REMOVED", f"{path}/{name}") for name in old.keys() - new.keys()]
    differences += [Difference("ENUM_CONST_ADDED", f"{path}/{name}") for name in new.keys() - old.keys()]
    return differences + [Difference("ENUM_CONST_CHANGED", f"{path}/{name}")
                          for name in old.keys() & new.keys() if old[name] != new[name]]


def _kind(kind: str) -> str:
    """Confluent's field kinds: an enum counts as a scalar (a varint on the wire)."""
    return "scalar" if kind == "enum" else kind


def _map_value(model: FieldModel) -> str:
    return model.type[len(f"map<{model.key_type},"):-1]


def _local_name(full_name: str, package: str) -> str:
    """A type's name without its package, so that a package moved with its types renames nothing."""
    return full_name[len(package) + 1:] if package and full_name.startswith(f"{package}.") else full_name


def _compare_scalars(old_kind: str, old_type: str, new_kind: str, new_type: str,
                     labels: tuple[str | None, str | None], path: str) -> list[Difference]:
    old_encoding = "varint" if old_kind == "enum" else _SCALAR_ENCODINGS.get(old_type)
    new_encoding = "varint" if new_kind == "enum" else _SCALAR_ENCODINGS.get(new_type)
    if old_encoding != new_encoding:
        return [Difference("FIELD_SCALAR_KIND_CHANGED", path)]
    old_label, new_label = labels
    # As in Confluent, a label is compared only when both fields spell one (proto3's implicit label is none).
    if old_label is None or new_label is None or old_label == new_label:
        return []
    kind = "FIELD_STRING_OR_BYTES_LABEL_CHANGED" if old_encoding == "length" else "FIELD_NUMERIC_LABEL_CHANGED"
    return [Difference(kind, path)]


# Printing, in the layout of Confluent's canonical string: in a file the imports, options, messages, enums,
# extensions and services; in a message the reserved ranges, options, fields, oneofs, groups, extension
# ranges, nested messages and nested enums; comments and spacing dropped, so that they do not change a
# schema's identity. The normalized text also sorts what carries no meaning in its order (imports, options,
# fields, oneofs, enum values, reserved ranges) and writes every type name fully qualified; the order of
# messages is kept, as serialized records name their message by its index.


def _print_file(tree: ast.File, normalize: bool) -> str:
    lines: list[str] = []
    if tree.edition is not None:
        lines.append(f'edition = "{tree.edition}";')
    elif tree.syntax is not None and (not normalize or tree.syntax == "proto3"):
        lines.append(f'syntax = "{tree.syntax}";')
    elements = [element for element in tree.file_elements if not isinstance(element, ast.Comment)]
    lines += [f"package {element.name};" for element in _of(elements, ast.Package)]
    for public in (False, True):
        imports = [element for element in _of(elements, ast.Import) if element.public == public]
        texts = [f'import {"public " if public else "weak " if element.weak else ""}"{element.name}";'
                 for element in imports]
        lines += sorted(set(texts)) if normalize else texts
    lines += _print_options(_of(elements, ast.Option), normalize, 0)
    for kind in (ast.Message, ast.Enum, ast.Extension, ast.Service):
        for element in _of(elements, kind):
            lines += _print_element(element, normalize, 0)
    return "\n".join(lines) + "\n"


def _of(elements: Iterable[Any], kind: type) -> list[Any]:
    return [element for element in elements if isinstance(element, kind)]


def _print_options(options: list[ast.Option], normalize: bool, depth: int) -> list[str]:
    ordered = sorted(options, key=lambda option: option.name) if normalize else options
    return [f"{'  ' * depth}option {option.name} = {_value(option.value)};" for option in ordered]


def _print_block(head: str, body: list[str], depth: int) -> list[str]:
    indent = "  " * depth
    return [f"{indent}{head} {{", *body, f"{indent}}}"]


def _print_element(element: Any, normalize: bool, depth: int) -> list[str]:
    indent = "  " * depth
    if isinstance(element, ast.Message):
        return _print_block(f"message {element.name}", _print_message_body(element.elements, normalize, depth + 1),
                            depth)
    if isinstance(element, ast.Group):
        label = f"{element.cardinality.value.lower()} " if element.cardinality else ""
        return _print_block(f"{label}group {element.name} = {element.number}",
                            _print_message_body(element.elements, normalize, depth + 1), depth)
    if isinstance(element, ast.Enum):
        values = _of(element.elements, ast.EnumValue)
        if normalize:
            values.sort(key=lambda value: (value.number, value.name))
        body = [*_print_reserved(_of(element.elements, ast.EnumReserved), normalize, depth + 1),
                *_print_options(_of(element.elements, ast.Option), normalize, depth + 1),
                *(line for value in values for line in _print_element(value, normalize, depth + 1))]
        return _print_block(f"enum {element.name}", body, depth)
    if isinstance(element, ast.OneOf):
        members = _of(element.elements, ast.Field) + _of(element.elements, ast.Group)
        if normalize:
            members.sort(key=lambda member: member.number)
        body = [*_print_options(_of(element.elements, ast.Option), normalize, depth + 1),
                *(line for member in members for line in _print_element(member, normalize, depth + 1))]
        return _print_block(f"oneof {element.name}", body, depth)
    if isinstance(element, ast.Service):
        body = [*_print_options(_of(element.elements, ast.Option), normalize, depth + 1),
                *(line for method in _of(element.elements, ast.Method)
                  for line in _print_element(method, normalize, depth + 1))]
        return _print_block(f"service {element.name}", body, depth)
    if isinstance(element, ast.Extension):
        body = [line for member in element.elements if not isinstance(member, ast.Comment)
                for line in _print_element(member, normalize, depth + 1)]
        return _print_block(f"extend {element.typeName}", body, depth)
    if isinstance(element, ast.Field):
        label = f"{element.cardinality.value.lower()} " if element.cardinality else ""
        return [f"{indent}{label}{element.type} {element.name} = {element.number}"
                f"{_compact_options(element.options, normalize)};"]
    if isinstance(element, ast.MapField):
        return [f"{indent}map<{element.key_type}, {element.value_type}> {element.name} = {element.number}"
                f"{_compact_options(element.options, normalize)};"]
    if isinstance(element, ast.EnumValue):
        return [f"{indent}{element.name} = {element.number}{_compact_options(element.options, normalize)};"]
    if isinstance(element, ast.ExtensionRange):
        return [f"{indent}extensions {', '.join(str(text) for text in element.ranges)}"
                f"{_compact_options(element.options, normalize)};"]
    if isinstance(element, ast.Method):
        head = (f"{indent}rpc {element.name} {_message_type(element.input_type)} "
                f"returns {_message_type(element.output_type)}")
        body = _print_options(_of(element.elements, ast.Option), normalize, depth + 1)
        return [f"{head} {{", *body, f"{indent}}};"] if body else [f"{head};"]
    return []


def _print_message_body(elements: list[Any], normalize: bool, depth: int) -> list[str]:
    fields = [element for element in elements if isinstance(element, ast.Field | ast.MapField)]
    oneofs = [oneof for oneof in _of(elements, ast.OneOf) if not normalize or _oneof_members(oneof)]
    groups = _of(elements, ast.Group)
    if normalize:
        fields.sort(key=lambda element: element.number)
        oneofs.sort(key=lambda oneof: min(_oneof_members(oneof)))
        groups.sort(key=lambda element: element.number)
    lines = [*_print_reserved(_of(elements, ast.Reserved), normalize, depth),
             *_print_options(_of(elements, ast.Option), normalize, depth)]
    for element in [*fields, *oneofs, *groups, *_of(elements, ast.ExtensionRange), *_of(elements, ast.Extension),
                    *_of(elements, ast.Message), *_of(elements, ast.Enum)]:
        lines += _print_element(element, normalize, depth)
    return lines


def _oneof_members(oneof: ast.OneOf) -> list[int]:
    return [member.number for member in oneof.elements if isinstance(member, ast.Field | ast.Group)]


def _print_reserved(reserveds: list[Any], normalize: bool, depth: int) -> list[str]:
    indent = "  " * depth
    if not normalize:
        return [f"{indent}reserved {', '.join(_reserved_parts(element))};" for element in reserveds]
    numbers: list[tuple[int, str]] = []
    names: list[str] = []
    for element in reserveds:
        names += [f'"{name}"' for name in element.names]
        for text in element.ranges:
            match = _RANGE.match(str(text))
            if match is not None:
                low, high = match.group(1), match.group(2)
                numbers.append((int(low), low if high is None or high == low else f"{low} to {high}"))
    ordered = [text for _, text in sorted(numbers)] + sorted(names)
    return [f"{indent}reserved {text};" for text in ordered]


def _reserved_parts(element: Any) -> list[str]:
    return [str(text) for text in element.ranges] + [f'"{name}"' for name in element.names]


def _message_type(value: ast.MessageType) -> str:
    return f"({'stream ' if value.stream else ''}{value.type})"


def _compact_options(options: list[ast.Option], normalize: bool) -> str:
    if not options:
        return ""
    ordered = sorted(options, key=lambda option: option.name) if normalize else options
    return " [" + ", ".join(f"{option.name} = {_value(option.value)}" for option in ordered) + "]"


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, ast.Identifier):
        return value.name
    if isinstance(value, ast.MessageLiteral):
        fields = [f"{element.name}: {_value(element.value)}" for element in value.elements
                  if isinstance(element, ast.MessageLiteralField)]
        return "{ " + " ".join(fields) + " }" if fields else "{}"
    if isinstance(value, list):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    return str(value)
