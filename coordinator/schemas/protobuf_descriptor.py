"""Protobuf schemas as ``FileDescriptorProto``: the registry's ``format=serialized`` form, both ways.

confluent-kafka's Python ``ProtobufSerializer`` registers a schema (and each file it imports) as the base64
of its compiled ``FileDescriptorProto``, and its deserializer asks for schemas with ``format=serialized``.
Confluent's registry accepts that form and answers with it; so do we: a descriptor is printed as .proto text
(which the registry parses, stores and compares as any other schema), and a parsed .proto file is compiled
into a descriptor (types fully qualified, map fields as their ``*Entry`` messages, proto3 ``optional`` as
synthetic oneofs, as protoc writes them).

What a descriptor carries that the text does not show is dropped: source locations, ``json_name`` when it is
the default, options that are not plain values (messages, unknown extensions), and ``extend`` blocks.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError
from minikafka.coordinator.schemas.errors import InvalidSchema
from proto_schema_parser import ast

FieldProto = descriptor_pb2.FieldDescriptorProto

_SCALARS = {
    "double": FieldProto.TYPE_DOUBLE, "float": FieldProto.TYPE_FLOAT, "int64": FieldProto.TYPE_INT64,
    "uint64": FieldProto.TYPE_UINT64, "int32": FieldProto.TYPE_INT32, "fixed64": FieldProto.TYPE_FIXED64,
    "fixed32": FieldProto.TYPE_FIXED32, "bool": FieldProto.TYPE_BOOL, "string": FieldProto.TYPE_STRING,
    "bytes": FieldProto.TYPE_BYTES, "uint32": FieldProto.TYPE_UINT32, "sfixed32": FieldProto.TYPE_SFIXED32,
    "sfixed64": FieldProto.TYPE_SFIXED64, "sint32": FieldProto.TYPE_SINT32, "sint64": FieldProto.TYPE_SINT64,
}
_SCALAR_NAMES = {number: name for name, number in _SCALARS.items()}
_LABELS = {"optional": FieldProto.LABEL_OPTIONAL, "required": FieldProto.LABEL_REQUIRED,
           "repeated": FieldProto.LABEL_REPEATED}
_BASE64 = re.compile(r"^[A-Za-z0-9+/=\s]+$")
_MAX_RANGE_END = 536_870_912  # one past the largest field number: "to max" in a descriptor


def looks_serialized(text: str) -> bool:
    """True for base64 text: .proto text always has punctuation outside base64's alphabet (``;``, ``{``)."""
    return bool(text.strip()) and _BASE64.match(text) is not None


def text_of_serialized(text: str, what: str) -> str:
    """The .proto text of a base64 ``FileDescriptorProto``."""
    try:
        data = base64.b64decode("".join(text.split()), validate=True)
        descriptor = descriptor_pb2.FileDescriptorProto.FromString(data)
    except (binascii.Error, ValueError, DecodeError) as error:
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: neither .proto text nor a serialized "
                            f"FileDescriptorProto ({error})") from error
    if descriptor.syntax not in ("", "proto2", "proto3"):
        raise InvalidSchema(f"Invalid Protobuf schema in {what}: syntax {descriptor.syntax!r} is not supported")
    return _FilePrinter(descriptor).text()


def serialized(descriptor: descriptor_pb2.FileDescriptorProto) -> str:
    return base64.standard_b64encode(descriptor.SerializeToString()).decode("ascii")


# Descriptor -> .proto text.


def default_json_name(name: str) -> str:
    """protoc's JSON name of a field: underscores dropped, the letter after each one capitalized."""
    parts = name.split("_")
    return parts[0] + "".join(part[:1].upper() + part[1:] for part in parts[1:])


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _repeated(field: Any) -> bool:
    # protobuf 5 added FieldDescriptor.is_repeated and version 7 removed FieldDescriptor.label.
    repeated = getattr(field, "is_repeated", None)
    return bool(repeated) if repeated is not None else field.label == field.LABEL_REPEATED


def _option_value(field: Any, value: Any) -> str | None:
    if field.type == field.TYPE_MESSAGE or _repeated(field):
        return None
    if field.type == field.TYPE_ENUM:
        enum_value = field.enum_type.values_by_number.get(value)
        return enum_value.name if enum_value is not None else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quoted(value)
    if isinstance(value, bytes):
        return _quoted(value.decode("latin-1"))
    return repr(value) if isinstance(value, float) else str(value)


def _options(options: Any, skip: Iterable[str] = ()) -> list[tuple[str, str]]:
    """The plain-valued options of an options message, as (name, value text)."""
    printed = []
    for field, value in options.ListFields():
        if field.name in skip:
            continue
        text = _option_value(field, value)
        if text is not None:
            printed.append((f"({field.full_name})" if field.is_extension else field.name, text))
    return printed


def _ranges(ranges: Iterable[Any]) -> list[str]:
    texts = []
    for item in ranges:
        last = item.end - 1
        if last >= _MAX_RANGE_END - 1:
            texts.append(f"{item.start} to max")
        else:
            texts.append(str(item.start) if last == item.start else f"{item.start} to {last}")
    return texts


class _FilePrinter:
    def __init__(self, descriptor: descriptor_pb2.FileDescriptorProto) -> None:
        self.descriptor = descriptor
        self.proto3 = descriptor.syntax == "proto3"
        self.lines: list[str] = []

    def text(self) -> str:
        file = self.descriptor
        self.lines.append(f'syntax = "{file.syntax or "proto2"}";')
        if file.package:
            self.lines.append(f"package {file.package};")
        public, weak = set(file.public_dependency), set(file.weak_dependency)
        for index, dependency in enumerate(file.dependency):
            modifier = "public " if index in public else "weak " if index in weak else ""
            self.lines.append(f"import {modifier}{_quoted(dependency)};")
        self.lines += [f"option {name} = {value};" for name, value in _options(file.options)]
        for message in file.message_type:
            self._message(message, 0)
        for enum in file.enum_type:
            self._enum(enum, 0)
        for service in file.service:
            self._service(service)
        return "\n".join(self.lines) + "\n"

    def _message(self, message: Any, depth: int, head: str = "") -> None:
        indent = "  " * depth
        self.lines.append(f"{indent}{head or 'message ' + message.name} {{")
        inner = "  " * (depth + 1)
        entries = {entry.name: entry for entry in message.nested_type if entry.options.map_entry}
        # A proto2 group is a field and a nested message written as one block.
        groups = {nested.name: nested for nested in message.nested_type
                  if any(f.type == FieldProto.TYPE_GROUP and f.type_name.rsplit(".", 1)[-1] == nested.name
                         for f in message.field)}
        for name, value in _options(message.options, skip=("map_entry",)):
            self.lines.append(f"{inner}option {name} = {value};")
        if message.reserved_range:
            self.lines.append(f"{inner}reserved {', '.join(_ranges(message.reserved_range))};")
        if message.reserved_name:
            self.lines.append(f"{inner}reserved {', '.join(_quoted(name) for name in message.reserved_name)};")
        if message.extension_range:
            self.lines.append(f"{inner}extensions {', '.join(_ranges(message.extension_range))};")
        real_oneofs = {field.oneof_index for field in message.field
                       if field.HasField("oneof_index") and not field.proto3_optional}
        printed_oneofs: set[int] = set()
        for field in message.field:
            if field.HasField("oneof_index") and field.oneof_index in real_oneofs:
                if field.oneof_index not in printed_oneofs:
                    printed_oneofs.add(field.oneof_index)
                    self._oneof(message, field.oneof_index, depth + 1)
                continue
            group = groups.get(field.type_name.rsplit(".", 1)[-1]) if field.type == FieldProto.TYPE_GROUP else None
            if group is not None:
                label = {FieldProto.LABEL_REPEATED: "repeated ", FieldProto.LABEL_REQUIRED: "required "}.get(
                    field.label, "optional ")
                self._message(group, depth + 1, f"{label}group {group.name} = {field.number}")
                continue
            self.lines.append(f"{inner}{self._field(field, entries, in_oneof=False)}")
        for nested in message.nested_type:
            if not nested.options.map_entry and nested.name not in groups:
                self._message(nested, depth + 1)
        for enum in message.enum_type:
            self._enum(enum, depth + 1)
        self.lines.append(f"{indent}}}")

    def _oneof(self, message: Any, index: int, depth: int) -> None:
        indent = "  " * depth
        self.lines.append(f"{indent}oneof {message.oneof_decl[index].name} {{")
        for field in message.field:
            if field.HasField("oneof_index") and field.oneof_index == index:
                self.lines.append(f"{indent}  {self._field(field, {}, in_oneof=True)}")
        self.lines.append(f"{indent}}}")

    def _field(self, field: Any, entries: Mapping[str, Any], in_oneof: bool) -> str:
        entry_name = field.type_name.rsplit(".", 1)[-1]
        options = _options(field.options)
        if field.HasField("default_value"):
            default = field.default_value
            quoted = field.type in (FieldProto.TYPE_STRING, FieldProto.TYPE_BYTES)
            options.append(("default", _quoted(default) if quoted else default))
        if field.HasField("json_name") and field.json_name != default_json_name(field.name):
            options.append(("json_name", _quoted(field.json_name)))
        suffix = " [" + ", ".join(f"{name} = {value}" for name, value in options) + "]" if options else ""
        if field.label == FieldProto.LABEL_REPEATED and field.type == FieldProto.TYPE_MESSAGE and (
                entry_name in entries):
            entry = entries[entry_name]
            key, value = sorted(entry.field, key=lambda f: f.number)[:2]
            return f"map<{self._type(key)}, {self._type(value)}> {field.name} = {field.number}{suffix};"
        label = ""
        if field.label == FieldProto.LABEL_REPEATED:
            label = "repeated "
        elif field.label == FieldProto.LABEL_REQUIRED:
            label = "required "
        elif not in_oneof and (not self.proto3 or field.proto3_optional):
            label = "optional "
        return f"{label}{self._type(field)} {field.name} = {field.number}{suffix};"

    @staticmethod
    def _type(field: Any) -> str:
        if field.type in _SCALAR_NAMES:
            return _SCALAR_NAMES[field.type]
        if not field.type_name:
            raise InvalidSchema(f"Invalid Protobuf schema: field {field.name!r} has no type")
        return str(field.type_name)

    def _enum(self, enum: Any, depth: int) -> None:
        indent, inner = "  " * depth, "  " * (depth + 1)
        self.lines.append(f"{indent}enum {enum.name} {{")
        self.lines += [f"{inner}option {name} = {value};" for name, value in _options(enum.options)]
        for value in enum.value:
            options = _options(value.options)
            suffix = " [" + ", ".join(f"{name} = {text}" for name, text in options) + "]" if options else ""
            self.lines.append(f"{inner}{value.name} = {value.number}{suffix};")
        if enum.reserved_range:
            # Enum reserved ranges are inclusive, unlike messages'.
            texts = [str(r.start) if r.start == r.end else f"{r.start} to {r.end}" for r in enum.reserved_range]
            self.lines.append(f"{inner}reserved {', '.join(texts)};")
        if enum.reserved_name:
            self.lines.append(f"{inner}reserved {', '.join(_quoted(name) for name in enum.reserved_name)};")
        self.lines.append(f"{indent}}}")

    def _service(self, service: Any) -> None:
        self.lines.append(f"service {service.name} {{")
        self.lines += [f"  option {name} = {value};" for name, value in _options(service.options)]
        for method in service.method:
            request = f"{'stream ' if method.client_streaming else ''}{method.input_type}"
            response = f"{'stream ' if method.server_streaming else ''}{method.output_type}"
            self.lines.append(f"  rpc {method.name} ({request}) returns ({response});")
        self.lines.append("}")


# .proto text (parsed, type names fully qualified) -> descriptor.


def compile_file(tree: ast.File, symbols: Mapping[str, str]) -> descriptor_pb2.FileDescriptorProto:
    """The ``FileDescriptorProto`` of a parsed file whose type names are fully qualified (``.pkg.Type``)."""
    file = descriptor_pb2.FileDescriptorProto()
    proto3 = tree.syntax == "proto3"
    file.syntax = tree.syntax or "proto2"
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            file.package = element.name
        elif isinstance(element, ast.Import):
            if element.public:
                file.public_dependency.append(len(file.dependency))
            if element.weak:
                file.weak_dependency.append(len(file.dependency))
            file.dependency.append(element.name)
        elif isinstance(element, ast.Option):
            _set_option(file.options, element)
        elif isinstance(element, ast.Message):
            full_name = f"{file.package}.{element.name}" if file.package else element.name
            _compile_message(file.message_type.add(), element, full_name, symbols, proto3)
        elif isinstance(element, ast.Enum):
            _compile_enum(file.enum_type.add(), element)
        elif isinstance(element, ast.Service):
            _compile_service(file.service.add(), element)
    return file


def _set_option(options: Any, option: ast.Option) -> None:
    """Sets a plain option known to the options message; custom ``(name)`` options are left out."""
    field = options.DESCRIPTOR.fields_by_name.get(option.name)
    if field is None or _repeated(field) or field.type == field.TYPE_MESSAGE:
        return
    value = option.value
    if isinstance(value, ast.Identifier):
        value = value.name
    try:
        if field.type == field.TYPE_ENUM:
            enum_value = field.enum_type.values_by_name.get(str(value))
            if enum_value is not None:
                setattr(options, field.name, enum_value.number)
        elif field.type == field.TYPE_BOOL:
            setattr(options, field.name, value is True or value == "true")
        elif field.type in (field.TYPE_STRING, field.TYPE_BYTES):
            setattr(options, field.name, str(value) if field.type == field.TYPE_STRING else str(value).encode())
        else:
            setattr(options, field.name, value)
    except (TypeError, ValueError):
        return  # a value of the wrong type: protoc would refuse it, the descriptor goes without


def _entry_name(field_name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in field_name.split("_")) + "Entry"


def _fill_field(target: Any, element: Any, symbols: Mapping[str, str], proto3: bool) -> None:
    target.name = element.name
    target.number = element.number
    label = element.cardinality.value.lower() if element.cardinality is not None else "optional"
    target.label = _LABELS[label]
    if element.type in _SCALARS:
        target.type = _SCALARS[element.type]
    else:
        target.type_name = element.type
        kind = symbols.get(element.type.lstrip("."), "message")
        target.type = FieldProto.TYPE_ENUM if kind == "enum" else FieldProto.TYPE_MESSAGE
    target.json_name = default_json_name(element.name)
    for option in element.options:
        if option.name == "default":
            value = option.value
            target.default_value = value.name if isinstance(value, ast.Identifier) else (
                ("true" if value else "false") if isinstance(value, bool) else str(value))
        elif option.name == "json_name":
            target.json_name = str(option.value)
        else:
            _set_option(target.options, option)
    if proto3 and element.cardinality == ast.FieldCardinality.OPTIONAL:
        target.proto3_optional = True


def _compile_message(message: Any, element: ast.Message | ast.Group, full_name: str, symbols: Mapping[str, str],
                     proto3: bool) -> None:
    message.name = element.name
    synthetic: list[Any] = []
    for item in element.elements:
        if isinstance(item, ast.Field):
            field = message.field.add()
            _fill_field(field, item, symbols, proto3)
            if field.proto3_optional:
                synthetic.append(field)
        elif isinstance(item, ast.MapField):
            _compile_map(message, item, full_name, symbols, proto3)
        elif isinstance(item, ast.Group):
            _compile_group(message, item, full_name, symbols, proto3, oneof_index=None)
        elif isinstance(item, ast.OneOf):
            index = len(message.oneof_decl)
            message.oneof_decl.add().name = item.name
            for member in item.elements:
                if isinstance(member, ast.Field):
                    field = message.field.add()
                    _fill_field(field, member, symbols, proto3)
                    field.ClearField("label")
                    field.label = FieldProto.LABEL_OPTIONAL
                    field.oneof_index = index
                elif isinstance(member, ast.Group):
                    _compile_group(message, member, full_name, symbols, proto3, oneof_index=index)
        elif isinstance(item, ast.Message):
            _compile_message(message.nested_type.add(), item, f"{full_name}.{item.name}", symbols, proto3)
        elif isinstance(item, ast.Enum):
            _compile_enum(message.enum_type.add(), item)
        elif isinstance(item, ast.Reserved):
            _compile_reserved(message, item)
        elif isinstance(item, ast.ExtensionRange):
            for start, end in _parse_ranges(item.ranges, exclusive_end=True):
                extension_range = message.extension_range.add()
                extension_range.start, extension_range.end = start, end
        elif isinstance(item, ast.Option):
            _set_option(message.options, item)
    # protoc puts the synthetic oneofs of proto3 optional fields after the real ones.
    for field in synthetic:
        field.oneof_index = len(message.oneof_decl)
        message.oneof_decl.add().name = f"_{field.name}"


def _compile_map(message: Any, element: ast.MapField, full_name: str, symbols: Mapping[str, str],
                 proto3: bool) -> None:
    entry = message.nested_type.add()
    entry.name = _entry_name(element.name)
    entry.options.map_entry = True
    for number, name, type_name in ((1, "key", element.key_type), (2, "value", element.value_type)):
        _fill_field(entry.field.add(), ast.Field(name=name, number=number, type=type_name), symbols, proto3)
    field = message.field.add()
    field.name, field.number, field.json_name = element.name, element.number, default_json_name(element.name)
    field.label = FieldProto.LABEL_REPEATED
    field.type = FieldProto.TYPE_MESSAGE
    field.type_name = f".{full_name}.{entry.name}"
    for option in element.options:
        _set_option(field.options, option)


def _compile_group(message: Any, element: ast.Group, full_name: str, symbols: Mapping[str, str], proto3: bool,
                   oneof_index: int | None) -> None:
    nested = message.nested_type.add()
    _compile_message(nested, element, f"{full_name}.{element.name}", symbols, proto3)
    field = message.field.add()
    field.name, field.number = element.name.lower(), element.number
    field.json_name = default_json_name(field.name)
    label = element.cardinality.value.lower() if element.cardinality is not None else "optional"
    field.label = _LABELS[label]
    field.type = FieldProto.TYPE_GROUP
    field.type_name = f".{full_name}.{element.name}"
    if oneof_index is not None:
        field.oneof_index = oneof_index


def _parse_ranges(ranges: Iterable[str], exclusive_end: bool) -> list[tuple[int, int]]:
    parsed = []
    for text in ranges:
        parts = str(text).replace(" ", "").split("to")
        start = int(parts[0], 0)
        end = start if len(parts) == 1 else (_MAX_RANGE_END - 1 if parts[1] == "max" else int(parts[1], 0))
        parsed.append((start, end + 1 if exclusive_end else end))
    return parsed


def _compile_reserved(message: Any, element: ast.Reserved) -> None:
    message.reserved_name.extend(element.names)
    for start, end in _parse_ranges(element.ranges, exclusive_end=True):
        reserved = message.reserved_range.add()
        reserved.start, reserved.end = start, end


def _compile_enum(enum: Any, element: ast.Enum) -> None:
    enum.name = element.name
    for item in element.elements:
        if isinstance(item, ast.EnumValue):
            value = enum.value.add()
            value.name, value.number = item.name, item.number
            for option in item.options:
                _set_option(value.options, option)
        elif isinstance(item, ast.EnumReserved):
            enum.reserved_name.extend(item.names)
            for start, end in _parse_ranges(item.ranges, exclusive_end=False):
                reserved = enum.reserved_range.add()
                reserved.start, reserved.end = start, end
        elif isinstance(item, ast.Option):
            _set_option(enum.options, item)


def _compile_service(service: Any, element: ast.Service) -> None:
    service.name = element.name
    for item in element.elements:
        if isinstance(item, ast.Method):
            method = service.method.add()
            method.name = item.name
            method.input_type, method.client_streaming = item.input_type.type, item.input_type.stream
            method.output_type, method.server_streaming = item.output_type.type, item.output_type.stream
        elif isinstance(item, ast.Option):
            _set_option(service.options, item)
