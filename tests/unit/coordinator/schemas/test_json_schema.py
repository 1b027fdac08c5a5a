"""JSON Schema as a registry format: parsing, canonical forms, references and Confluent's compatibility rules.

Golden cases come from Confluent's documentation of JSON Schema compatibility: the content models and their
rules in https://docs.confluent.io/platform/current/schema-registry/fundamentals/serdes-develop/serdes-json.html
("JSON Schema compatibility rules") and the article it links,
https://yokota.blog/2021/03/29/understanding-json-schema-compatibility/ (by the author of Confluent's checker);
where those are silent, the behaviour of Confluent's checker (confluentinc/schema-registry,
json-schema-provider's diff package), read for semantics.
``new.incompatibilities(old)`` is the BACKWARD check; FORWARD is ``old.incompatibilities(new)``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from minikafka.coordinator.schemas.errors import InvalidSchema
from minikafka.coordinator.schemas.json_schema import JSON_SCHEMA_FORMAT, JsonSchema


def parse(schema: Any, references: dict[str, Any] | None = None) -> JsonSchema:
    texts = {name: json.dumps(value) for name, value in (references or {}).items()}
    return JSON_SCHEMA_FORMAT.parse(schema if isinstance(schema, str) else json.dumps(schema), texts)


def error_types(new: Any, old: Any) -> list[str]:
    """The errorType of each message of the BACKWARD check of ``new`` against ``old``."""
    messages = parse(new).incompatibilities(parse(old))
    return [re.match(r'\{errorType:"([A-Z_]+)"', message).group(1) for message in messages]  # type: ignore[union-attr]


def obj(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, **extra}


STRING = {"type": "string"}
FOO_BAR = {"foo": STRING, "bar": STRING}
FOO_BAR_BAZ = {**FOO_BAR, "baz": STRING}


def test_format_name() -> None:
    assert JSON_SCHEMA_FORMAT.name == "JSON"


# Open content model (the default): the yokota.blog article's first example.


def test_adding_a_property_to_an_open_model_is_not_backward_compatible() -> None:
    # Old data may already carry "baz" with any value, which the new schema's string would reject.
    assert error_types(obj(FOO_BAR_BAZ), obj(FOO_BAR)) == ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]


def test_removing_a_property_from_an_open_model_is_backward_compatible() -> None:
    assert error_types(obj(FOO_BAR), obj(FOO_BAR_BAZ)) == []


def test_adding_an_unconstrained_property_to_an_open_model_is_compatible() -> None:
    assert error_types(obj({**FOO_BAR, "baz": {}}), obj(FOO_BAR)) == []


# Closed content model (additionalProperties false).


def test_closed_model_adding_an_optional_property_is_backward_compatible() -> None:
    assert error_types(obj(FOO_BAR_BAZ, additionalProperties=False), obj(FOO_BAR, additionalProperties=False)) == []


def test_closed_model_removing_a_property_is_not_backward_compatible() -> None:
    old, new = obj(FOO_BAR_BAZ, additionalProperties=False), obj(FOO_BAR, additionalProperties=False)
    assert error_types(new, old) == ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    assert error_types(old, new) == []  # FORWARD: the old reader reads the new data


def test_closed_model_adding_a_required_property_is_not_backward_compatible() -> None:
    old = obj(FOO_BAR, additionalProperties=False)
    new = obj(FOO_BAR_BAZ, required=["baz"], additionalProperties=False)
    assert error_types(new, old) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]


def test_closed_model_adding_a_required_property_with_a_default_is_compatible() -> None:
    old = obj(FOO_BAR, additionalProperties=False)
    new = obj({**FOO_BAR, "baz": {"type": "string", "default": "x"}}, required=["baz"], additionalProperties=False)
    assert error_types(new, old) == []


def test_closing_an_open_model_is_not_backward_compatible() -> None:
    assert error_types(obj(FOO_BAR, additionalProperties=False), obj(FOO_BAR)) == ["ADDITIONAL_PROPERTIES_REMOVED"]
    assert error_types(obj(FOO_BAR), obj(FOO_BAR, additionalProperties=False)) == []


# Partially open content model: additionalProperties or patternProperties is a schema.


def test_partially_open_model_property_added_covered_by_additional_properties() -> None:
    old = obj(FOO_BAR, additionalProperties=STRING)
    new = obj(FOO_BAR_BAZ, additionalProperties=STRING)
    assert error_types(new, old) == []
    assert error_types(old, new) == []


def test_partially_open_model_property_added_not_covered() -> None:
    old = obj(FOO_BAR, additionalProperties=STRING)
    new = obj({**FOO_BAR, "baz": {"type": "integer"}}, additionalProperties=STRING)
    assert error_types(new, old) == ["PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]
    assert error_types(old, new) == ["PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]


def test_partially_open_model_through_pattern_properties() -> None:
    old = obj(FOO_BAR, patternProperties={"^b": STRING}, additionalProperties=False)
    assert error_types(obj(FOO_BAR_BAZ, patternProperties={"^b": STRING}, additionalProperties=False), old) == []
    new = obj({**FOO_BAR, "baz": {"type": "number"}}, patternProperties={"^b": STRING}, additionalProperties=False)
    assert error_types(new, old) == ["PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]


# Types.


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ({"type": "integer"}, {"type": "number"}, []),  # widening
        ({"type": "number"}, {"type": "integer"}, ["TYPE_NARROWED"]),
        (STRING, {"type": "integer"}, ["TYPE_CHANGED"]),
        (STRING, {"type": ["string", "null"]}, []),
        ({"type": ["string", "null"]}, STRING, ["SUM_TYPE_NARROWED"]),
        (STRING, {}, []),
        ({}, STRING, ["TYPE_CHANGED"]),
        (STRING, True, []),
        (STRING, False, ["TYPE_CHANGED"]),
        (False, STRING, []),
        ({"properties": FOO_BAR}, obj(FOO_BAR), []),  # "properties" already makes an object schema
        ({"maxLength": 3}, obj(FOO_BAR), ["TYPE_CHANGED"]),
    ],
)
def test_type_changes(old: Any, new: Any, expected: list[str]) -> None:
    assert error_types(new, old) == expected


def test_nested_property_type_change_names_its_path() -> None:
    old = obj({"inner": obj({"x": STRING})})
    new = obj({"inner": obj({"x": {"type": "boolean"}})})
    messages = parse(new).incompatibilities(parse(old))
    assert messages == [
        '{errorType:"TYPE_CHANGED", description:"The type of the schema at path '
        "'#/properties/inner/properties/x' in the reader schema does not match the writer schema\"}"
    ]


# Constraints: adding or tightening one is incompatible, removing or loosening it is not.


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (STRING, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_ADDED"]),
        ({"type": "string", "maxLength": 5}, STRING, []),
        ({"type": "string", "maxLength": 5}, {"type": "string", "maxLength": 9}, []),
        ({"type": "string", "maxLength": 9}, {"type": "string", "maxLength": 5}, ["MAX_LENGTH_DECREASED"]),
        ({"type": "string", "minLength": 1}, {"type": "string", "minLength": 2}, ["MIN_LENGTH_INCREASED"]),
        ({"type": "string", "minLength": 2}, {"type": "string", "minLength": 1}, []),
        (STRING, {"type": "string", "pattern": "^a"}, ["PATTERN_ADDED"]),
        ({"type": "string", "pattern": "^a"}, {"type": "string", "pattern": "^b"}, ["PATTERN_CHANGED"]),
        ({"type": "string", "pattern": "^a"}, STRING, []),
        ({"type": "number"}, {"type": "number", "maximum": 10}, ["MAXIMUM_ADDED"]),
        ({"type": "number", "maximum": 10}, {"type": "number", "maximum": 5}, ["MAXIMUM_DECREASED"]),
        ({"type": "number", "minimum": 1}, {"type": "number", "minimum": 0}, []),
        ({"type": "number", "minimum": 0}, {"type": "number", "minimum": 1}, ["MINIMUM_INCREASED"]),
        ({"type": "number", "exclusiveMaximum": 3}, {"type": "number", "exclusiveMaximum": 2},
         ["EXCLUSIVE_MAXIMUM_DECREASED"]),
        ({"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 4}, ["MULTIPLE_OF_EXPANDED"]),
        ({"type": "number", "multipleOf": 4}, {"type": "number", "multipleOf": 2}, []),
        ({"type": "number", "multipleOf": 0.5}, {"type": "number", "multipleOf": 0.25}, []),
        ({"type": "number", "multipleOf": 2}, {"type": "number", "multipleOf": 3}, ["MULTIPLE_OF_CHANGED"]),
        ({"type": "array"}, {"type": "array", "maxItems": 3}, ["MAX_ITEMS_ADDED"]),
        ({"type": "array", "minItems": 3}, {"type": "array"}, []),
        ({"type": "array"}, {"type": "array", "uniqueItems": True}, ["UNIQUE_ITEMS_ADDED"]),
        ({"type": "object"}, {"type": "object", "maxProperties": 3}, ["MAX_PROPERTIES_ADDED"]),
        ({"type": "object", "minProperties": 1}, {"type": "object", "minProperties": 2},
         ["MIN_PROPERTIES_INCREASED"]),
    ],
)
def test_constraints(old: Any, new: Any, expected: list[str]) -> None:
    assert error_types(new, old) == expected


def test_draft4_boolean_exclusive_maximum() -> None:
    draft4 = {"$schema": "http://json-schema.org/draft-04/schema#", "type": "number", "maximum": 3}
    assert error_types({**draft4, "exclusiveMaximum": True}, draft4) == ["EXCLUSIVE_MAXIMUM_ADDED"]
    assert error_types(draft4, {**draft4, "exclusiveMaximum": True}) == []


# Enums, required, dependencies.


def test_enum_extended_narrowed_changed() -> None:
    assert error_types({"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}) == []
    assert error_types({"enum": ["a"]}, {"enum": ["a", "b"]}) == ["ENUM_ARRAY_NARROWED"]
    assert error_types({"enum": ["a", "c"]}, {"enum": ["a", "b"]}) == ["ENUM_ARRAY_CHANGED"]
    assert error_types({"const": "a"}, {"enum": ["a", "b"]}) == ["ENUM_ARRAY_NARROWED"]


def test_required_attribute_added_and_removed() -> None:
    assert error_types(obj(FOO_BAR, required=["foo"]), obj(FOO_BAR)) == ["REQUIRED_ATTRIBUTE_ADDED"]
    assert error_types(obj(FOO_BAR), obj(FOO_BAR, required=["foo"])) == []
    with_default = obj({**FOO_BAR, "foo": {"type": "string", "default": "x"}}, required=["foo"])
    assert error_types(with_default, obj(FOO_BAR)) == []
    # Requiring a property neither schema declares is not judged, as in Confluent's checker.
    assert error_types(obj(FOO_BAR, required=["other"]), obj(FOO_BAR)) == []


def test_dependencies() -> None:
    old = obj(FOO_BAR, dependencies={"foo": ["bar"]})
    assert error_types(obj(FOO_BAR), old) == []
    assert error_types(old, obj(FOO_BAR)) == ["DEPENDENCY_ARRAY_ADDED"]
    assert error_types(obj(FOO_BAR, dependencies={"foo": {"required": ["bar"]}}), obj(FOO_BAR)) == [
        "DEPENDENCY_SCHEMA_ADDED"
    ]


# Arrays: items and tuples with their own content model.


def test_array_items_type_change() -> None:
    assert error_types({"type": "array", "items": {"type": "integer"}}, {"type": "array", "items": STRING}) == [
        "TYPE_CHANGED"
    ]
    assert error_types({"type": "array", "items": {"type": "number"}},
                       {"type": "array", "items": {"type": "integer"}}) == []


def test_tuple_items_content_models() -> None:
    closed = {"type": "array", "items": [STRING], "additionalItems": False}
    closed_longer = {"type": "array", "items": [STRING, STRING], "additionalItems": False}
    assert error_types(closed_longer, closed) == []
    assert error_types(closed, closed_longer) == ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]
    open_, open_longer = {"type": "array", "items": [STRING]}, {"type": "array", "items": [STRING, STRING]}
    assert error_types(open_longer, open_) == ["ITEM_ADDED_TO_OPEN_CONTENT_MODEL"]
    assert error_types(open_, open_longer) == []


def test_2020_12_prefix_items() -> None:
    draft = "https://json-schema.org/draft/2020-12/schema"
    closed = {"$schema": draft, "type": "array", "prefixItems": [STRING], "items": False}
    longer = {"$schema": draft, "type": "array", "prefixItems": [STRING, STRING], "items": False}
    assert error_types(longer, closed) == []
    assert error_types(closed, longer) == ["ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"]


# Combined schemas: oneOf/anyOf are sums, allOf a product.


def test_sum_types() -> None:
    two = {"oneOf": [STRING, {"type": "integer"}]}
    three = {"oneOf": [STRING, {"type": "integer"}, {"type": "boolean"}]}
    assert error_types(three, two) == []
    assert error_types(two, three) == ["SUM_TYPE_NARROWED"]
    assert error_types(two, STRING) == []  # a single type extended into a sum
    assert error_types(STRING, two) == ["TYPE_CHANGED"]
    assert error_types({"oneOf": [{"type": "integer"}, {"type": "boolean"}]}, STRING) == ["TYPE_CHANGED"]
    assert error_types({"anyOf": [STRING, {"type": "integer"}]}, two) == []  # towards anyOf loosens
    assert error_types(two, {"anyOf": [STRING, {"type": "integer"}]}) == ["COMBINED_TYPE_CHANGED"]
    assert error_types(two, {"anyOf": [STRING]}) == []  # a single subschema may become a oneOf
    swapped = {"oneOf": [{"type": "boolean"}, {"type": "integer"}]}
    assert error_types(swapped, two) == ["COMBINED_TYPE_SUBSCHEMAS_CHANGED"]
    assert error_types({"oneOf": [STRING, STRING, {"type": "integer"}]}, two) == []  # repeats collapse


def test_singleton_combinations_compare_as_their_subschema() -> None:
    assert error_types({"allOf": [STRING]}, STRING) == []
    assert error_types(STRING, {"anyOf": [STRING]}) == []
    assert error_types({"allOf": [{"type": "integer"}]}, STRING) == ["TYPE_CHANGED"]


def test_product_types() -> None:
    one = {"allOf": [obj(FOO_BAR)]}
    two = {"allOf": [obj(FOO_BAR), {"required": ["foo"]}]}
    assert error_types(one, two) == []  # PRODUCT_TYPE_NARROWED is compatible
    assert error_types(two, one) == ["PRODUCT_TYPE_EXTENDED"]


def test_removing_a_false_property_from_a_closed_model_is_compatible() -> None:
    old = obj({**FOO_BAR, "gone": False}, additionalProperties=False)
    assert error_types(obj(FOO_BAR, additionalProperties=False), old) == []


def test_partially_open_model_still_judges_required_added_properties() -> None:
    old = obj(FOO_BAR, additionalProperties=STRING)
    new = obj(FOO_BAR_BAZ, required=["baz"], additionalProperties=STRING)
    assert error_types(new, old) == ["REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"]


def test_array_items_added_and_removed() -> None:
    assert error_types({"type": "array", "items": STRING}, {"type": "array"}) == ["SCHEMA_ADDED"]
    assert error_types({"type": "array"}, {"type": "array", "items": STRING}) == []


def test_not() -> None:
    assert error_types({"not": STRING}, {}) == ["NOT_TYPE_EXTENDED"]
    assert error_types({"not": {"type": "integer"}}, {"not": {"type": "number"}}) == []
    assert error_types({"not": {"type": "number"}}, {"not": {"type": "integer"}}) == ["NOT_TYPE_EXTENDED"]


# References, local and to other subjects' schemas.


def test_local_refs_are_followed() -> None:
    old = {"definitions": {"name": STRING}, **obj({"a": {"$ref": "#/definitions/name"}})}
    new = {"definitions": {"name": {"type": "integer"}}, **obj({"a": {"$ref": "#/definitions/name"}})}
    assert error_types(new, old) == ["TYPE_CHANGED"]
    assert error_types(old, old) == []


def test_recursive_schema_compares_without_looping() -> None:
    node = {"definitions": {"node": obj({"next": {"$ref": "#/definitions/node"}, "v": STRING})},
            "$ref": "#/definitions/node"}
    assert error_types(node, node) == []


def test_references_by_name_and_against_the_root_id() -> None:
    address = obj({"street": STRING})
    customer = obj({"address": {"$ref": "address.json"}})
    parsed = parse(customer, {"address.json": address})
    with_id = parse({"$id": "http://example.com/customer.json", **customer}, {"address.json": address})
    narrower = parse(customer, {"address.json": obj({"street": STRING}, additionalProperties=False)})
    assert parsed.incompatibilities(with_id) == []
    assert narrower.incompatibilities(parsed) != []
    assert parse({"$ref": "address.json#/properties/street"}, {"address.json": address}).canonical


def test_unresolvable_reference_is_invalid() -> None:
    with pytest.raises(InvalidSchema, match="cannot resolve"):
        parse({"$ref": "missing.json"})
    with pytest.raises(InvalidSchema, match="cannot resolve"):
        parse({"$ref": "#/definitions/missing"})


# Canonical and normalized forms.


def test_canonical_ignores_whitespace_but_keeps_key_order() -> None:
    compact = parse('{"type":"object","properties":{"a":{"type":"string"}}}')
    spaced = parse('{ "type" : "object",\n  "properties": { "a": {"type": "string"} } }')
    reordered = parse('{"properties":{"a":{"type":"string"}},"type":"object"}')
    assert compact.canonical == spaced.canonical == '{"type":"object","properties":{"a":{"type":"string"}}}'
    assert reordered.canonical != compact.canonical
    assert reordered.normalized() == compact.normalized() == '{"properties":{"a":{"type":"string"}},"type":"object"}'


def test_canonical_keeps_non_ascii_text() -> None:
    assert parse({"description": "été"}).canonical == '{"description":"été"}'


# Malformed input: only InvalidSchema escapes.


@pytest.mark.parametrize(
    "text",
    [
        "", "{", "[]", "3", '"x"', "null", '{"type": 5}', '{"type": "strin"}', '{"properties": []}',
        '{"$schema": 3}',
        '{"maxLength": -1}', '{"minimum": NaN}', '{"required": "a"}', "[" * 5000 + "]" * 5000,
        '{"items": ' * 80 + "{}" + "}" * 80, '{"$ref": 3}', '{"$ref": "http://[::1"}',
        '{"$schema": "http://json-schema.org/draft-04/schema#", "not": true}',
    ],
)
def test_malformed_schemas_raise_invalid_schema(text: str) -> None:
    with pytest.raises(InvalidSchema):
        JSON_SCHEMA_FORMAT.parse(text, {})


def test_malformed_reference_raises_invalid_schema() -> None:
    with pytest.raises(InvalidSchema, match=r"reference 'a\.json'"):
        JSON_SCHEMA_FORMAT.parse('{"$ref": "a.json"}', {"a.json": "{"})


def test_an_unknown_schema_dialect_means_draft_7() -> None:
    for declared in ("http://json-schema.org/draft-03/schema#", "urn:unknown"):
        assert parse({"$schema": declared, **obj(FOO_BAR)}).incompatibilities(parse(obj(FOO_BAR))) == []
    with pytest.raises(InvalidSchema):
        parse({"$schema": "urn:unknown", "type": "strin"})


def test_every_draft_parses() -> None:
    for draft in ("http://json-schema.org/draft-04/schema#", "http://json-schema.org/draft-06/schema#",
                  "http://json-schema.org/draft-07/schema#", "https://json-schema.org/draft/2019-09/schema",
                  "https://json-schema.org/draft/2020-12/schema"):
        assert parse({"$schema": draft, **obj(FOO_BAR)}).incompatibilities(parse(obj(FOO_BAR))) == []


# Fuzzing: random text and mutated valid schemas never raise anything but InvalidSchema, and parsed ones compare.

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(
        st.sampled_from(["type", "properties", "items", "additionalProperties", "required", "enum", "$ref",
                         "oneOf", "anyOf", "allOf", "not", "maxLength", "minimum", "multipleOf", "pattern",
                         "patternProperties", "prefixItems", "dependencies", "const", "$id", "definitions",
                         "additionalItems", "a", "b"]) | st.text(max_size=4),
        children, max_size=4),
    max_leaves=20,
)
SEEDS = [obj(FOO_BAR_BAZ, required=["foo"], additionalProperties=False),
         {"oneOf": [STRING, {"type": "array", "items": [{"type": "integer"}]}]},
         {"definitions": {"a": {"$ref": "#/definitions/a"}}, "$ref": "#/definitions/a"}]


def _parse_or_invalid(text: str) -> JsonSchema | None:
    try:
        return JSON_SCHEMA_FORMAT.parse(text, {"other.json": '{"type": "string"}'})
    except InvalidSchema:
        return None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60))
def test_fuzz_random_text(text: str) -> None:
    _parse_or_invalid(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(old=json_values, new=json_values, seed=st.sampled_from(SEEDS), key=st.sampled_from(["x", "items", "type"]))
def test_fuzz_mutated_schemas_parse_and_compare(old: Any, new: Any, seed: dict[str, Any], key: str) -> None:
    candidates = [_parse_or_invalid(json.dumps(value)) for value in (old, new, {**seed, key: new})]
    parsed = [candidate for candidate in candidates if candidate is not None]
    for reader in parsed:
        for writer in parsed:
            assert isinstance(reader.incompatibilities(writer), list)
