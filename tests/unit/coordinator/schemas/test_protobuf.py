"""Protobuf as a registry format: parsing, imports through references, canonical forms and Confluent's rules.

Golden cases follow Confluent's documentation: the summary table of
https://docs.confluent.io/platform/current/schema-registry/fundamentals/schema-evolution.html (for Protobuf,
fields may be added and removed under every compatibility type; messages may not be removed),
https://yokota.blog/2021/08/26/understanding-protobuf-compatibility/ (by the author of Confluent's checker:
scalar types of one wire encoding, oneofs, required fields), and where those are silent the behaviour of
Confluent's checker (confluentinc/schema-registry, protobuf-provider's diff package), read for semantics.
``new.incompatibilities(old)`` is the BACKWARD check; FORWARD is ``old.incompatibilities(new)``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.protobuf import PROTOBUF_FORMAT, ProtobufSchema


def parse(text: str, references: dict[str, str] | None = None) -> ProtobufSchema:
    return PROTOBUF_FORMAT.parse(text, references or {})


def proto3(body: str, header: str = "") -> str:
    return f'syntax = "proto3";\npackage demo;\n{header}\n{body}\n'


def error_types(new: str, old: str, references: dict[str, str] | None = None) -> list[str]:
    messages = parse(new, references).incompatibilities(parse(old, references))
    return [re.match(r'\{errorType:"([A-Z_]+)"', message).group(1) for message in messages]  # type: ignore[union-attr]


def both_ways(new: str, old: str) -> tuple[list[str], list[str]]:
    """(BACKWARD, FORWARD) error types of changing ``old`` into ``new``."""
    return error_types(new, old), error_types(old, new)


USER = proto3("message User { string name = 1; int32 age = 2; }")


def test_format_name() -> None:
    assert PROTOBUF_FORMAT.name == "PROTOBUF"


# Fields added and removed: compatible in both directions (Confluent's summary table).


def test_adding_and_removing_fields_is_fully_compatible() -> None:
    more = proto3("message User { string name = 1; int32 age = 2; string email = 3; }")
    assert both_ways(more, USER) == ([], [])
    assert both_ways(USER, more) == ([], [])


def test_renaming_a_field_is_compatible() -> None:
    assert both_ways(proto3("message User { string full_name = 1; int32 age = 2; }"), USER) == ([], [])


def test_removing_a_message_is_not_compatible() -> None:
    two = proto3("message User { string name = 1; int32 age = 2; } message Group { string id = 1; }")
    assert both_ways(USER, two) == (["MESSAGE_REMOVED"], [])


def test_message_removed_message_names_the_path() -> None:
    two = proto3("message User { string name = 1; } message Group { string id = 1; }")
    one = proto3("message User { string name = 1; }")
    assert parse(one).incompatibilities(parse(two)) == [
        '{errorType:"MESSAGE_REMOVED", description:"The message at path \'#/Group\' in the writer schema is '
        'missing from the reader schema"}'
    ]


# Field types.


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("int32", "int64", []),
        ("uint32", "bool", []),
        ("string", "bytes", []),
        ("fixed32", "sfixed32", []),
        ("sint32", "sint64", []),
        ("int32", "sint32", ["FIELD_SCALAR_KIND_CHANGED"]),
        ("int32", "string", ["FIELD_SCALAR_KIND_CHANGED"]),
        ("float", "double", ["FIELD_SCALAR_KIND_CHANGED"]),
        ("fixed64", "int64", ["FIELD_SCALAR_KIND_CHANGED"]),
        ("int32", "Other", ["FIELD_KIND_CHANGED"]),
        ("Other", "Another", ["FIELD_NAMED_TYPE_CHANGED"]),
        ("Kind", "int32", []),  # an enum is a varint on the wire
        ("Kind", "OtherKind", []),  # so is any other enum, for Confluent
        ("Kind", "string", ["FIELD_SCALAR_KIND_CHANGED"]),
        ("Kind", "Other", ["FIELD_KIND_CHANGED"]),
    ],
)
def test_field_type_changes(old: str, new: str, expected: list[str]) -> None:
    types = ("message Other { string a = 1; } message Another { string a = 1; } "
             "enum Kind { K0 = 0; } enum OtherKind { O0 = 0; }")
    assert error_types(proto3(f"message M {{ {new} f = 1; }} {types}"),
                       proto3(f"message M {{ {old} f = 1; }} {types}")) == expected


def test_map_value_type_change() -> None:
    old = proto3("message M { map<string, int32> m = 1; }")
    assert error_types(proto3("message M { map<string, int64> m = 1; }"), old) == []
    assert error_types(proto3("message M { map<string, string> m = 1; }"), old) == ["FIELD_SCALAR_KIND_CHANGED"]
    assert error_types(proto3("message M { int32 m = 1; }"), old) == ["FIELD_KIND_CHANGED"]


def test_label_changes() -> None:
    proto2 = 'syntax = "proto2"; message M {{ {} f = 1; }}'
    assert both_ways(proto2.format("repeated int32"), proto2.format("optional int32")) == (
        ["FIELD_NUMERIC_LABEL_CHANGED"], ["FIELD_NUMERIC_LABEL_CHANGED"])
    assert both_ways(proto2.format("repeated string"), proto2.format("optional string")) == ([], [])
    assert both_ways(proto2.format("required sint64"), proto2.format("optional sint64")) == (
        ["FIELD_NUMERIC_LABEL_CHANGED"], ["FIELD_NUMERIC_LABEL_CHANGED"])
    # Like Confluent, proto3's implicit label is no label: nothing to compare.
    assert both_ways(proto3("message M { repeated int32 f = 1; }"), proto3("message M { int32 f = 1; }")) == (
        [], [])
    assert both_ways(proto3("message M { repeated int32 f = 1; }"), proto3("message M { optional int32 f = 1; }")) \
        == (["FIELD_NUMERIC_LABEL_CHANGED"], ["FIELD_NUMERIC_LABEL_CHANGED"])


def test_required_fields_in_proto2() -> None:
    old = 'syntax = "proto2"; message M { optional string a = 1; }'
    added = 'syntax = "proto2"; message M { optional string a = 1; required int32 b = 2; }'
    assert both_ways(added, old) == (["REQUIRED_FIELD_ADDED"], ["REQUIRED_FIELD_REMOVED"])


# Oneofs (yokota.blog's rules).


def test_moving_one_field_into_a_new_oneof_is_compatible() -> None:
    old = proto3("message M { string a = 1; int32 b = 2; }")
    new = proto3("message M { oneof choice { string a = 1; } int32 b = 2; }")
    assert error_types(new, old) == []


def test_moving_several_fields_into_a_new_oneof_is_not() -> None:
    old = proto3("message M { string a = 1; int32 b = 2; }")
    new = proto3("message M { oneof choice { string a = 1; int32 b = 2; } }")
    assert error_types(new, old) == ["MULTIPLE_FIELDS_MOVED_TO_ONEOF"]


def test_moving_a_field_into_an_existing_oneof_is_not() -> None:
    old = proto3("message M { oneof choice { string a = 1; } int32 b = 2; }")
    new = proto3("message M { oneof choice { string a = 1; int32 b = 2; } }")
    assert error_types(new, old) == ["FIELD_MOVED_TO_EXISTING_ONEOF"]


def test_adding_and_removing_oneof_fields() -> None:
    old = proto3("message M { oneof choice { string a = 1; int32 b = 2; } }")
    fewer = proto3("message M { oneof choice { string a = 1; } }")
    assert both_ways(fewer, old) == (["ONEOF_FIELD_REMOVED"], [])
    # Leaving the oneof for a plain field loses no data.
    moved_out = proto3("message M { oneof choice { string a = 1; } int32 b = 2; }")
    assert both_ways(moved_out, old) == ([], ["FIELD_MOVED_TO_EXISTING_ONEOF"])


def test_field_moved_between_oneofs_is_still_compared_by_number() -> None:
    old = proto3("message M { oneof first { string a = 1; } }")
    new = proto3("message M { oneof second { int32 a = 1; } }")
    assert error_types(new, old) == ["FIELD_SCALAR_KIND_CHANGED"]


# Packages, syntax, enums.


def test_package_change_is_not_compatible() -> None:
    moved = USER.replace("package demo;", "package other.demo;")
    assert both_ways(moved, USER) == (["PACKAGE_CHANGED"], ["PACKAGE_CHANGED"])


def test_types_are_compared_by_name_within_their_package() -> None:
    old = proto3("message M { Inner i = 1; } message Inner { string s = 1; }")
    new = old.replace("package demo;", "package demo.v2;").replace("Inner i", ".demo.v2.Inner i")
    assert [d.kind for d in parse(new).differences(parse(old))] == ["PACKAGE_CHANGED"]


def test_syntax_change_alone_is_compatible() -> None:
    # Confluent's checker has no syntax rule: proto2 and proto3 share the wire format.
    proto2 = 'syntax = "proto2"; package demo; message User { optional string name = 1; optional int32 age = 2; }'
    assert both_ways(proto2, USER) == ([], [])


def test_a_field_type_is_compared_through_to_the_message() -> None:
    old = proto3("message M { Inner i = 1; } message Inner { string s = 1; }")
    new = proto3("message M { Inner i = 1; } message Inner { int64 s = 1; }")
    assert sorted(error_types(new, old)) == ["FIELD_NAMED_TYPE_CHANGED", "FIELD_SCALAR_KIND_CHANGED"]


def test_a_referenced_message_is_compared_across_versions_of_the_reference() -> None:
    schema = proto3("message Customer { shared.Address address = 1; }", 'import "address.proto";')
    v1 = {"address.proto": 'syntax = "proto3"; package shared; message Address { string street = 1; }'}
    v2 = {"address.proto": 'syntax = "proto3"; package shared; message Address { string street = 1; int32 n = 2; }'}
    v3 = {"address.proto": 'syntax = "proto3"; package shared; message Address { bool street = 1; }'}
    assert parse(schema, v2).incompatibilities(parse(schema, v1)) == []
    kinds = [d.kind for d in parse(schema, v3).differences(parse(schema, v1)) if not d.compatible]
    assert sorted(kinds) == ["FIELD_NAMED_TYPE_CHANGED", "FIELD_SCALAR_KIND_CHANGED"]


def test_recursive_messages_compare_without_looping() -> None:
    tree = proto3("message Node { Node left = 1; Node right = 2; string v = 3; }")
    assert error_types(tree, tree) == []


def test_enum_constant_changes_are_compatible() -> None:
    old = proto3("enum Color { RED = 0; GREEN = 1; } message M { Color c = 1; }")
    new = proto3("enum Color { RED = 0; BLUE = 2; } message M { Color c = 1; }")
    assert both_ways(new, old) == ([], [])
    kinds = sorted(d.kind for d in parse(new).differences(parse(old)))
    assert kinds == ["ENUM_CONST_ADDED", "ENUM_CONST_REMOVED"]


def test_nested_messages_are_compared_by_path() -> None:
    old = proto3("message Outer { message Inner { int32 x = 1; } Inner inner = 1; }")
    new = proto3("message Outer { message Inner { string x = 1; } Inner inner = 1; }")
    # The field of the changed type is reported too, as Confluent compares a field through to its message.
    assert [d.path for d in parse(new).differences(parse(old))] == ["#/Outer.Inner/1", "#/Outer/1"]


# Imports through references; the well-known types and Confluent's own files are built in.


def test_imports_resolve_through_references() -> None:
    references = {"address.proto": 'syntax = "proto3"; package shared; message Address { string street = 1; }'}
    schema = proto3("message Customer { shared.Address address = 1; }", 'import "address.proto";')
    assert parse(schema, references).model.messages["Customer"].fields[1].type == ".shared.Address"


def test_imports_of_imports_resolve() -> None:
    references = {
        "a.proto": 'syntax = "proto3"; package a; import "b.proto"; message A { b.B b = 1; }',
        "b.proto": 'syntax = "proto3"; package b; message B { string s = 1; }',
    }
    parse(proto3("message C { a.A a = 1; }", 'import "a.proto";'), references)


def test_builtin_imports() -> None:
    header = ('import "google/protobuf/timestamp.proto"; import "google/protobuf/wrappers.proto"; '
              'import "confluent/meta.proto"; import "google/type/date.proto"; import "confluent/type/decimal.proto";')
    schema = parse(proto3(
        "message M { google.protobuf.Timestamp at = 1; google.protobuf.StringValue s = 2; google.type.Date d = 3; "
        "confluent.type.Decimal price = 4 [(confluent.field_meta).params = { key: \"precision\" value: \"8\" }]; }",
        header))
    assert schema.model.messages["M"].fields[1].type == ".google.protobuf.Timestamp"


@pytest.mark.parametrize(
    ("text", "references", "message"),
    [
        (proto3("message M { Missing m = 1; }"), {}, "not defined"),
        (proto3("message M { string s = 1; }", 'import "nowhere.proto";'), {}, "neither a reference nor built in"),
        (proto3("message M { a.A a = 1; }", 'import "a.proto";'),
         {"a.proto": 'syntax = "proto3"; package a; import "b.proto"; message A {}',
          "b.proto": 'syntax = "proto3"; import "a.proto";'}, "import cycle"),
        (proto3("message M { string s = 1; }", 'import "bad.proto";'), {"bad.proto": "message {"}, "bad.proto"),
    ],
)
def test_reference_errors(text: str, references: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidSchema, match=message):
        parse(text, references)


# Canonical and normalized forms.


def test_canonical_ignores_comments_and_layout() -> None:
    spaced = '// a user\nsyntax = "proto3";\n\npackage demo;\n\n/* doc */ message User {\n  string name = 1; // n\n' \
             '  int32 age = 2;\n}\n'
    assert parse(spaced).canonical == parse(USER).canonical
    assert parse(USER).canonical == 'syntax = "proto3";\npackage demo;\nmessage User {\n  string name = 1;\n' \
                                    '  int32 age = 2;\n}\n'


def test_canonical_keeps_declaration_order_and_options() -> None:
    reordered = proto3("message User { int32 age = 2; string name = 1; }")
    assert parse(reordered).canonical != parse(USER).canonical
    deprecated = proto3("enum E { A = 0; B = 1 [deprecated = true]; }")
    assert parse(deprecated).canonical != parse(proto3("enum E { A = 0; B = 1; }")).canonical


def test_canonical_groups_declarations_as_confluent_prints_them() -> None:
    # Confluent's canonical string lists a message's fields before its oneofs and nested types, and a file's
    # messages before its enums: moving those declarations around does not make another schema.
    one = parse(proto3("enum E { A = 0; } message M { oneof o { string s = 2; } int32 a = 1; message N {} }"))
    other = parse(proto3("message M { message N {} int32 a = 1; oneof o { string s = 2; } } enum E { A = 0; }"))
    assert one.canonical == other.canonical
    assert one.canonical == (
        'syntax = "proto3";\npackage demo;\nmessage M {\n  int32 a = 1;\n  oneof o {\n    string s = 2;\n  }\n'
        "  message N {\n  }\n}\nenum E {\n  A = 0;\n}\n")


def test_normalized_sorts_fields_oneofs_enum_values_and_reserved_ranges() -> None:
    one = parse(proto3("message M { reserved 9, 4 to 5; int32 b = 2; int32 a = 1; oneof y { string t = 8; } "
                       "oneof x { string s = 7; } } enum E { A = 0; C = 2; B = 1; }"))
    other = parse(proto3("message M { int32 a = 1; int32 b = 2; reserved 4 to 5; reserved 9; "
                         "oneof x { string s = 7; } oneof y { string t = 8; } } enum E { A = 0; B = 1; C = 2; }"))
    assert one.canonical != other.canonical
    assert one.normalized() == other.normalized()
    assert one.normalized().startswith('syntax = "proto3";\npackage demo;\nmessage M {\n  reserved 4 to 5;\n'
                                       "  reserved 9;\n  int32 a = 1;\n  int32 b = 2;\n  oneof x {")


def test_normalized_keeps_the_order_of_messages() -> None:
    # A serialized record names its message by index in the file, so message order is meaningful.
    one = parse(proto3("message A {} message B {}"))
    assert one.normalized() != parse(proto3("message B {} message A {}")).normalized()


def test_normalized_sorts_imports_and_options_and_qualifies_types() -> None:
    header_ab = 'import "google/protobuf/any.proto";\nimport "google/protobuf/empty.proto";\n' \
                'option java_package = "x";\noption go_package = "y";'
    header_ba = 'import "google/protobuf/empty.proto";\nimport "google/protobuf/any.proto";\n' \
                'option go_package = "y";\noption java_package = "x";'
    body_short = "message A { message B { int32 x = 1; } B b = 1 [json_name = \"bb\", deprecated = true]; }"
    body_full = "message A { message B { int32 x = 1; } .demo.A.B b = 1 [deprecated = true, json_name = \"bb\"]; }"
    one, other = parse(proto3(body_short, header_ab)), parse(proto3(body_full, header_ba))
    assert one.canonical != other.canonical
    assert one.normalized() == other.normalized()
    assert ".demo.A.B b = 1 [deprecated = true, json_name = \"bb\"];" in one.normalized()


# Malformed input: only InvalidSchema escapes.


@pytest.mark.parametrize(
    "text",
    [
        "", "garbage", "message", "message A {", "message A { int32 a = 1 }", 'syntax = "proto4";',
        'syntax = "proto3"; message A { required int32 a = 1; }', "message A { int32 a = 0; }",
        "message A { int32 a = 536870912; }", "message A { int32 a = 19500; }",
        "message A { int32 a = 1; int32 b = 1; }",
        "message A { int32 a = 1; string a = 2; }", "message A { reserved 3; int32 a = 3; }",
        'message A { reserved "a"; int32 a = 1; }', "message A {} message A {}",
        "message A { map<float, int32> m = 1; }",
        'syntax = "proto3"; enum E { A = 1; }', "enum E {}", 'package a; package b;', "message A { B b = 1; }",
        'syntax = "proto3"; message A { group G = 1 { int32 x = 1; } }', "message A { int32 a = -1; }",
        "\x00", "message A { option (foo = 1; }", "{" * 3000,
    ],
)
def test_malformed_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        parse(text)


def test_non_string_input_raises_invalid_schema() -> None:
    with pytest.raises(InvalidSchema):
        PROTOBUF_FORMAT.parse(b"message A {}", {})  # type: ignore[arg-type]
    with pytest.raises(InvalidSchema):
        PROTOBUF_FORMAT.parse(["message A {}"], {})  # type: ignore[arg-type]
    with pytest.raises(InvalidSchema):
        PROTOBUF_FORMAT.parse('import "a.proto"; message A {}', {"a.proto": ["x"]})  # type: ignore[dict-item]


def test_parses_are_cached_by_text_and_references() -> None:
    assert parse(USER) is parse(USER)
    assert parse(USER) is not parse(USER, {"unused.proto": "message X {}"})
    for _ in range(2):  # an invalid schema stays invalid: errors are not cached as results
        with pytest.raises(InvalidSchema):
            parse("message A {")


def test_proto2_groups_and_services_parse() -> None:
    schema = parse('syntax = "proto2"; message A { optional group G = 1 { optional int32 x = 1; } } '
                   "service S { rpc Get (A) returns (stream A); }")
    assert schema.model.messages["A"].fields[1].kind == "message"
    assert "rpc Get (A) returns (stream A);" in schema.canonical
    assert "rpc Get (.A) returns (stream .A);" in schema.normalized()


# Fuzzing: random text and mutated valid schemas never raise anything but InvalidSchema.

SEED = proto3(
    'import "google/protobuf/timestamp.proto";\n'
    "message Order {\n  string id = 1;\n  repeated Item items = 2;\n  map<string, int64> counts = 3;\n"
    "  oneof payment { string card = 4; Wallet wallet = 5; }\n  google.protobuf.Timestamp at = 6;\n"
    "  message Item { int32 qty = 1 [deprecated = true]; }\n  enum State { NEW = 0; DONE = 1; }\n"
    "  State state = 7;\n  reserved 8, 10 to 12;\n}\nmessage Wallet { bytes token = 1; }\n"
    "service Shop { rpc Buy (Order) returns (Wallet); }\n")
TOKENS = ["message", "{", "}", ";", "=", "1", "0", "-1", "oneof", "map<", ">", "repeated", "required", "optional",
          "reserved", "to", "max", "import", '"a.proto"', "package", ".", "enum", "option", "(", ")", "[", "]",
          "group", "syntax", '"proto2"', "stream", "extend", "19000", "99999999999", "Order", "Wallet", "\\", "'"]


def _parse_or_invalid(text: str) -> ProtobufSchema | None:
    try:
        return PROTOBUF_FORMAT.parse(text, {"a.proto": 'syntax = "proto3"; package a; message A {}'})
    except InvalidSchema:
        return None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_fuzz_random_text(text: str) -> None:
    _parse_or_invalid(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_mutated_schema_parses_and_compares(data: st.DataObject) -> None:
    text = SEED
    for _ in range(data.draw(st.integers(1, 4))):
        start = data.draw(st.integers(0, len(text)))
        end = data.draw(st.integers(start, min(len(text), start + 12)))
        text = text[:start] + data.draw(st.sampled_from(["", *TOKENS])) + text[end:]
    parsed = _parse_or_invalid(text)
    seed = _parse_or_invalid(SEED)
    assert seed is not None
    if parsed is not None:
        assert isinstance(parsed.incompatibilities(seed), list)
        assert isinstance(seed.incompatibilities(parsed), list)
        assert parsed.normalized()
