"""JSON Schema as a schema registry format: parsing, Confluent's canonical forms and its compatibility rules.

A schema is checked against the metaschema of its draft (``$schema``: draft 4, 6, 7, 2019-09 or 2020-12;
draft 7 when absent or naming another draft, as Confluent assumes), and every ``$ref`` must resolve,
locally or to a reference.

Compatibility follows Confluent's rules for JSON Schema (docs.confluent.io, "Schema Evolution and
Compatibility", and https://yokota.blog/2021/03/29/understanding-json-schema-compatibility/): the old
schema is the writer, the new one the reader, and each difference between them has one of Confluent's
types (``PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL``, ``TYPE_NARROWED``, ``MAX_LENGTH_ADDED``...). Differences
Confluent counts as compatible (widening a type, removing a constraint...) are found but not reported.
An object's content model is open when ``additionalProperties`` allows anything, closed when it is
``false``, and partially open when a schema (``additionalProperties`` or ``patternProperties``) covers
the properties it does not list; arrays' tuples likewise through ``additionalItems`` (``items`` after
``prefixItems`` in 2020-12).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urljoin

from jsonschema.validators import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
    validator_for,
)
from minikafka.coordinator.schemas.errors import InvalidSchema
from referencing import Registry, Resource
from referencing._core import Resolver
from referencing.jsonschema import DRAFT4, DRAFT6, DRAFT7, DRAFT201909, DRAFT202012, Specification

# Deeper schemas are refused: the comparison recurses once per level, and Python's stack is finite.
MAX_DEPTH = 64

# The resolution of `$ref` chains (a -> b -> a) stops after this many hops.
MAX_REF_HOPS = 32

_SPECIFICATIONS: dict[type, Specification[Any]] = {
    Draft4Validator: DRAFT4,
    Draft6Validator: DRAFT6,
    Draft7Validator: DRAFT7,
    Draft201909Validator: DRAFT201909,
    Draft202012Validator: DRAFT202012,
}

# Keywords that constrain nothing: a schema made only of these accepts every document.
_ANNOTATIONS = frozenset({
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$comment", "$vocabulary", "title", "description",
    "default", "examples", "definitions", "$defs", "deprecated", "readOnly", "writeOnly", "format",
    "contentEncoding", "contentMediaType",
})
_COMBINATORS = ("allOf", "anyOf", "oneOf")

# Confluent's difference types that keep a reader on the new schema able to read data of the old one.
COMPATIBLE_CHANGES = frozenset({
    "SCHEMA_REMOVED", "TYPE_EXTENDED", "SUM_TYPE_EXTENDED", "PRODUCT_TYPE_NARROWED", "COMBINED_TYPE_EXTENDED",
    "NOT_TYPE_NARROWED", "ENUM_ARRAY_EXTENDED",
    "MAX_LENGTH_INCREASED", "MAX_LENGTH_REMOVED", "MIN_LENGTH_DECREASED", "MIN_LENGTH_REMOVED",
    "PATTERN_REMOVED", "MAXIMUM_INCREASED", "MAXIMUM_REMOVED", "MINIMUM_DECREASED", "MINIMUM_REMOVED",
    "EXCLUSIVE_MAXIMUM_INCREASED", "EXCLUSIVE_MAXIMUM_REMOVED", "EXCLUSIVE_MINIMUM_DECREASED",
    "EXCLUSIVE_MINIMUM_REMOVED", "MULTIPLE_OF_REDUCED", "MULTIPLE_OF_REMOVED",
    "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", "REQUIRED_ATTRIBUTE_REMOVED",
    "DEPENDENCY_ARRAY_NARROWED", "DEPENDENCY_ARRAY_REMOVED", "DEPENDENCY_SCHEMA_REMOVED",
    "MAX_PROPERTIES_INCREASED", "MAX_PROPERTIES_REMOVED", "MIN_PROPERTIES_DECREASED", "MIN_PROPERTIES_REMOVED",
    "ADDITIONAL_PROPERTIES_ADDED", "ADDITIONAL_PROPERTIES_EXTENDED",
    "PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL",
    "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL",
    "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", "PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL",
    "PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", "ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
    "PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "MAX_ITEMS_INCREASED", "MAX_ITEMS_REMOVED", "MIN_ITEMS_DECREASED", "MIN_ITEMS_REMOVED",
    "UNIQUE_ITEMS_REMOVED", "ADDITIONAL_ITEMS_ADDED", "ADDITIONAL_ITEMS_EXTENDED",
    "ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", "ITEM_ADDED_TO_CLOSED_CONTENT_MODEL",
    "ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", "ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
    "ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
})

# The descriptions name the new schema the reader's and the old one the writer's, as Confluent's do.
_DESCRIPTIONS = {
    "SCHEMA_ADDED": "The reader schema constrains a subschema at path '{path}' that the writer schema left out",
    "TYPE_CHANGED": "The type of the schema at path '{path}' in the reader schema does not match the writer schema",
    "TYPE_NARROWED": "The schema at path '{path}' in the reader schema accepts fewer types than the writer schema",
    "SUM_TYPE_NARROWED": "The reader schema has fewer alternatives at path '{path}' than the writer schema",
    "PRODUCT_TYPE_EXTENDED": "The reader schema has more allOf subschemas at path '{path}' than the writer schema",
    "COMBINED_TYPE_CHANGED": "The combination (allOf, anyOf, oneOf) at path '{path}' changed in the reader schema",
    "COMBINED_TYPE_SUBSCHEMAS_CHANGED": "The subschemas of the combination at path '{path}' in the reader schema "
                                        "do not match those of the writer schema",
    "ENUM_ARRAY_NARROWED": "The enum at path '{path}' in the reader schema has fewer values than the writer schema",
    "ENUM_ARRAY_CHANGED": "The enum at path '{path}' in the reader schema lacks values of the writer schema",
    "NOT_TYPE_EXTENDED": "The 'not' at path '{path}' in the reader schema rejects more than the writer schema",
    "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL": "The reader schema has a property at path '{path}' that the writer "
                                            "schema's open content model allowed with any value",
    "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL": "The reader schema has a required property without a default "
                                                       "at path '{path}' that the writer schema lacks",
    "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The property at path '{path}' of the writer schema is missing "
                                                  "from the reader schema's closed content model",
    "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The property added at path '{path}' in the reader "
                                                                  "schema is not covered by the writer schema's "
                                                                  "partially open content model",
    "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL": "The property removed at path '{path}' is not "
                                                                    "covered by the reader schema's partially open "
                                                                    "content model",
    "REQUIRED_ATTRIBUTE_ADDED": "The reader schema requires the property at path '{path}' without a default",
    "ADDITIONAL_PROPERTIES_REMOVED": "The reader schema does not allow the additional properties at path '{path}'",
    "ADDITIONAL_PROPERTIES_NARROWED": "The reader schema narrows the additional properties at path '{path}'",
    "ADDITIONAL_ITEMS_REMOVED": "The reader schema does not allow the additional items at path '{path}'",
    "ADDITIONAL_ITEMS_NARROWED": "The reader schema narrows the additional items at path '{path}'",
    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL": "The reader schema constrains an item at path '{path}' that the writer "
                                        "schema's open content model allowed with any value",
    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL": "The item at path '{path}' of the writer schema is missing from the "
                                              "reader schema's closed content model",
}


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
        description = template.format(path=self.path, kind=self.kind)
        return f'{{errorType:"{self.kind}", description:"{description}"}}'


@dataclass(frozen=True)
class _Node:
    """A subschema with the resolver its `$ref`s are resolved by (the base URI moves with `$id`)."""

    schema: Any
    resolver: Resolver[Any]


class JsonSchema:
    """A parsed JSON Schema: its document, canonical texts and compatibility against an older schema."""

    def __init__(self, document: Any, root: _Node) -> None:
        self.document = document
        self._root = root
        self.canonical = json.dumps(document, separators=(",", ":"), ensure_ascii=False)

    def normalized(self) -> str:
        """Confluent's ``normalize=true`` form: also blind to the order of an object's keys."""
        return json.dumps(self.document, separators=(",", ":"), ensure_ascii=False, sort_keys=True)

    def differences(self, old: JsonSchema) -> list[Difference]:
        """Every difference from ``old`` (the writer's schema) to this one (the reader's)."""
        return _Comparison().compare(old._root, self._root, "#")

    def incompatibilities(self, old: Any) -> list[str]:
        """Confluent's messages for the changes that stop this schema reading data written with ``old``."""
        if not isinstance(old, JsonSchema):
            return ['{errorType:"TYPE_CHANGED", description:"The writer schema is not a JSON schema"}']
        return [difference.message() for difference in self.differences(old) if not difference.compatible]

    def __repr__(self) -> str:
        return f"JsonSchema({self.canonical[:80]})"


class JsonSchemaFormat:
    """The registry's ``JSON`` schema type."""

    name = "JSON"

    def parse(self, text: str, references: Mapping[str, str]) -> JsonSchema:
        try:
            return _parse(text, references)
        except InvalidSchema:
            raise
        except (RecursionError, MemoryError) as error:
            raise InvalidSchema(f"Invalid JSON schema: too deeply nested ({type(error).__name__})") from error
        except Exception as error:
            # The libraries below raise many kinds of errors on strange input; every one means "invalid".
            raise InvalidSchema(f"Invalid JSON schema: {type(error).__name__}: {error}") from error


JSON_SCHEMA_FORMAT = JsonSchemaFormat()


def _reject_constant(name: str) -> Any:
    raise InvalidSchema(f"Invalid JSON: {name} is not a JSON number")


def _load(text: str, what: str) -> Any:
    try:
        document = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as error:
        raise InvalidSchema(f"Invalid JSON in {what}: {error}") from error
    if not isinstance(document, dict | bool):
        raise InvalidSchema(f"Invalid JSON schema in {what}: a schema is an object or a boolean")
    if _depth(document) > MAX_DEPTH:
        raise InvalidSchema(f"Invalid JSON schema in {what}: nested deeper than {MAX_DEPTH} levels")
    return document


def _depth(value: Any) -> int:
    deepest, pending = 0, [(value, 1)]
    while pending:
        item, level = pending.pop()
        deepest = max(deepest, level)
        if deepest > MAX_DEPTH:
            break
        children: Iterable[Any] = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        pending.extend((child, level + 1) for child in children)
    return deepest


def _check_against_metaschema(document: Any, what: str) -> Specification[Any]:
    declared = document.get("$schema") if isinstance(document, dict) else None
    # Like Confluent, a $schema naming no supported draft (or none) means draft 7; the draft 7 metaschema
    # then refuses a $schema that is not a string.
    validator = validator_for(document, default=Draft7Validator) if isinstance(declared, str) else Draft7Validator
    specification = _SPECIFICATIONS.get(validator)
    if specification is None:
        validator, specification = Draft7Validator, DRAFT7
    errors = sorted(validator(validator.META_SCHEMA).iter_errors(document), key=lambda e: list(e.path))
    if errors:
        first = errors[0]
        where = "/".join(str(part) for part in first.path)
        raise InvalidSchema(f"Invalid JSON schema in {what} at '#/{where}': {first.message}")
    return specification


def _parse(text: str, references: Mapping[str, str]) -> JsonSchema:
    if not isinstance(text, str):
        raise InvalidSchema("Invalid JSON schema: the schema must be a string")
    document = _load(text, "the schema")
    specification = _check_against_metaschema(document, "the schema")
    root_id = specification.id_of(document) or ""
    resources: list[tuple[str, Resource[Any]]] = []
    for name, reference_text in references.items():
        referenced = _load(reference_text, f"reference {name!r}")
        referenced_spec = _check_against_metaschema(referenced, f"reference {name!r}")
        resource = Resource.from_contents(referenced, default_specification=referenced_spec)
        resources.append((name, resource))
        if root_id:
            resources.append((urljoin(root_id, name), resource))
    root_resource = Resource.from_contents(document, default_specification=specification)
    registry: Registry[Any] = Registry().with_resources(resources).with_resource(root_id, root_resource)
    registry = registry.crawl()
    root = _Node(document, registry.resolver(root_id))
    _check_refs(root)
    return JsonSchema(document, root)


def _check_refs(root: _Node) -> None:
    """Every `$ref`, in the schema and in what it reaches through references, must resolve."""
    seen: set[int] = set()
    pending = [root]
    while pending:
        node = pending.pop()
        if id(node.schema) in seen:
            continue
        seen.add(id(node.schema))
        pending.extend(_children(node))
        if isinstance(node.schema, dict) and isinstance(node.schema.get("$ref"), str):
            try:
                pending.append(_follow(node))
            except Exception as error:
                raise InvalidSchema(f"Invalid JSON schema: cannot resolve $ref {node.schema['$ref']!r}") from error


def _enter(node: _Node, schema: Any) -> _Node:
    if isinstance(schema, dict) and isinstance(schema.get("$id") or schema.get("id"), str):
        resource = node.resolver.in_subresource(Resource.from_contents(schema, default_specification=DRAFT7))
        return _Node(schema, resource)
    return _Node(schema, node.resolver)


def _children(node: _Node) -> Iterator[_Node]:
    """The subschemas directly inside a schema (and inside its definitions)."""
    if not isinstance(node.schema, dict):
        return
    for key, value in node.schema.items():
        if key in ("properties", "patternProperties", "definitions", "$defs", "dependencies", "dependentSchemas"):
            if isinstance(value, dict):
                yield from (_enter(node, child) for child in value.values() if isinstance(child, dict | bool))
        elif key in ("items", "prefixItems", "allOf", "anyOf", "oneOf") and isinstance(value, list):
            yield from (_enter(node, child) for child in value if isinstance(child, dict | bool))
        elif key in ("items", "additionalItems", "additionalProperties", "not", "propertyNames", "contains",
                     "if", "then", "else") and isinstance(value, dict | bool):
            yield _enter(node, value)


def _follow(node: _Node) -> _Node:
    resolved = node.resolver.lookup(node.schema["$ref"])
    return _enter(_Node(resolved.contents, resolved.resolver), resolved.contents)


def _deref(node: _Node) -> _Node:
    for _ in range(MAX_REF_HOPS):
        if not (isinstance(node.schema, dict) and isinstance(node.schema.get("$ref"), str)):
            return node
        node = _follow(node)
    return _Node(True, node.resolver)


def _is_empty(schema: Any) -> bool:
    """True when the schema accepts every document (``true``, ``{}`` or only annotations)."""
    return schema is True or (isinstance(schema, dict) and not (schema.keys() - _ANNOTATIONS))


def _types(schema: dict[str, Any]) -> frozenset[str] | None:
    declared = schema.get("type")
    if isinstance(declared, str):
        return frozenset({declared})
    if isinstance(declared, list):
        return frozenset(item for item in declared if isinstance(item, str))
    return None


def _accepts(types: frozenset[str], kind: str) -> bool:
    return kind in types or (kind == "integer" and "number" in types)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _json_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Comparison:
    """Walks an old and a new schema side by side, collecting Confluent's difference types."""

    def __init__(self) -> None:
        # Pairs being compared: a recursive schema meets itself again and is assumed compatible there.
        self._active: set[tuple[int, int]] = set()

    def compatible(self, old: _Node, new: _Node, path: str) -> bool:
        return all(difference.compatible for difference in self.compare(old, new, path))

    def compare(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old, new = _deref(old), _deref(new)
        key = (id(old.schema), id(new.schema))
        if key in self._active:
            return []
        self._active.add(key)
        try:
            return self._compare_nodes(old, new, path)
        finally:
            self._active.discard(key)

    def _compare_nodes(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        if old.schema is False or _is_empty(new.schema):
            return [] if old.schema == new.schema or old.schema is False else [Difference("TYPE_EXTENDED", path)]
        if new.schema is False:
            return [Difference("TYPE_CHANGED", path)]
        old_schema = {} if old.schema is True else old.schema
        new_schema = new.schema
        old_combined = _combinator(old_schema)
        new_combined = _combinator(new_schema)
        if old_combined is None and new_combined is None:
            return self._compare_plain(_Node(old_schema, old.resolver), new, path)
        differences = self._compare_combined(_Node(old_schema, old.resolver), old_combined, new, new_combined, path)
        old_rest, new_rest = _without_combinators(old_schema), _without_combinators(new_schema)
        if not _is_empty(new_rest) and not (_is_empty(old_rest) and old_combined is not None):
            differences += self._compare_plain(_Node(old_rest, old.resolver), _Node(new_rest, new.resolver), path)
        return differences

    # Combined schemas: allOf is a product type, anyOf and oneOf sum types.

    def _compare_combined(self, old: _Node, old_combined: tuple[str, list[Any]] | None, new: _Node,
                          new_combined: tuple[str, list[Any]] | None, path: str) -> list[Difference]:
        if old_combined is not None and new_combined is not None:
            return self._compare_two_combined(old, old_combined, new, new_combined, path)
        if new_combined is not None:
            criterion, members = new_combined
            new_members = [_enter(new, member) for member in _distinct(members)]
            if len(new_members) == 1:
                inner = self.compare(old, new_members[0], path)
                if all(d.compatible for d in inner):
                    return inner
            elif criterion in ("anyOf", "oneOf"):
                # A plain schema became one alternative of a sum: its data still fits that alternative.
                for member in new_members:
                    inner = self.compare(old, member, path)
                    if all(d.compatible for d in inner):
                        return [*inner, Difference("SUM_TYPE_EXTENDED", path)]
            return [Difference("TYPE_CHANGED", path)]
        assert old_combined is not None
        old_members = [_enter(old, member) for member in _distinct(old_combined[1])]
        if len(old_members) == 1:
            inner = self.compare(old_members[0], _Node(_without_combinators(new.schema), new.resolver), path)
            if all(d.compatible for d in inner):
                return inner
        return [Difference("TYPE_CHANGED", path)]

    def _compare_two_combined(self, old: _Node, old_combined: tuple[str, list[Any]], new: _Node,
                              new_combined: tuple[str, list[Any]], path: str) -> list[Difference]:
        old_criterion, old_list = old_combined
        new_criterion, new_list = new_combined
        old_members = [_enter(old, member) for member in _distinct(old_list)]
        new_members = [_enter(new, member) for member in _distinct(new_list)]
        differences: list[Difference] = []
        if old_criterion != new_criterion:
            # Towards anyOf always loosens; towards oneOf or allOf only from a single subschema.
            loosened = new_criterion == "anyOf" or (new_criterion == "oneOf" and len(old_members) == 1) or (
                new_criterion == "allOf" and len(old_members) == len(new_members) == 1)
            if not loosened:
                return [Difference("COMBINED_TYPE_CHANGED", path)]
            differences.append(Difference("COMBINED_TYPE_EXTENDED", path))
        product = new_criterion == "allOf"
        if len(old_members) < len(new_members):
            differences.append(Difference("PRODUCT_TYPE_EXTENDED" if product else "SUM_TYPE_EXTENDED", path))
        elif len(old_members) > len(new_members):
            differences.append(Difference("PRODUCT_TYPE_NARROWED" if product else "SUM_TYPE_NARROWED", path))
        # Each subschema must pair with a distinct one of the other side that reads its data.
        fitting = [[j for j, candidate in enumerate(new_members) if self.compatible(member, candidate, path)]
                   for member in old_members]
        if _matching_size(fitting) < min(len(old_members), len(new_members)):
            differences.append(Difference("COMBINED_TYPE_SUBSCHEMAS_CHANGED", path))
        return differences

    # Plain schemas: the type, then the keywords of each type.

    def _compare_plain(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old_schema: dict[str, Any] = old.schema if isinstance(old.schema, dict) else {}
        new_schema: dict[str, Any] = new.schema if isinstance(new.schema, dict) else {}
        old, new = _Node(old_schema, old.resolver), _Node(new_schema, new.resolver)
        differences = _type_differences(_types(old_schema), _types(new_schema), path)
        if differences and _types(old_schema) is None and _implied_type(old_schema) in (_types(new_schema) or ()):
            # An untyped schema with, say, "properties" is already an object schema, as for Confluent.
            differences = []
        if any(d.kind == "TYPE_CHANGED" for d in differences):
            return differences
        differences += _enum_differences(old_schema, new_schema, path)
        differences += self._not_differences(old, new, path)
        for keyword, prefix in (("maxLength", "MAX_LENGTH"), ("minLength", "MIN_LENGTH"), ("maximum", "MAXIMUM"),
                                ("minimum", "MINIMUM"), ("exclusiveMaximum", "EXCLUSIVE_MAXIMUM"),
                                ("exclusiveMinimum", "EXCLUSIVE_MINIMUM"), ("maxProperties", "MAX_PROPERTIES"),
                                ("minProperties", "MIN_PROPERTIES"), ("maxItems", "MAX_ITEMS"),
                                ("minItems", "MIN_ITEMS")):
            differences += _bound_differences(old_schema.get(keyword), new_schema.get(keyword), prefix, path)
        differences += _pattern_differences(old_schema.get("pattern"), new_schema.get("pattern"), path)
        differences += _multiple_of_differences(old_schema.get("multipleOf"), new_schema.get("multipleOf"), path)
        if bool(old_schema.get("uniqueItems")) != bool(new_schema.get("uniqueItems")):
            kind = "UNIQUE_ITEMS_ADDED" if new_schema.get("uniqueItems") else "UNIQUE_ITEMS_REMOVED"
            differences.append(Difference(kind, path))
        differences += self._object_differences(old, new, path)
        differences += self._array_differences(old, new, path)
        return differences

    def _not_differences(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old_not, new_not = old.schema.get("not"), new.schema.get("not")
        if old_not is None and new_not is None:
            return []
        if old_not is None:
            return [Difference("NOT_TYPE_EXTENDED", path)]
        if new_not is None:
            return [Difference("NOT_TYPE_NARROWED", path)]
        # `not X` reads the data of `not Y` when Y accepts everything X does: the roles swap.
        inner = self.compare(_enter(new, new_not), _enter(old, old_not), f"{path}/not")
        if any(not d.compatible for d in inner):
            return [Difference("NOT_TYPE_EXTENDED", path)]
        return [Difference("NOT_TYPE_NARROWED", path)] if inner else []

    # Objects.

    def _object_differences(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old_properties = _dict(old.schema.get("properties"))
        new_properties = _dict(new.schema.get("properties"))
        old_required = _names(old.schema.get("required"))
        new_required = _names(new.schema.get("required"))
        differences: list[Difference] = []
        for name in sorted(old_properties.keys() | new_properties.keys()):
            where = f"{path}/properties/{name}"
            if name in old_properties and name in new_properties:
                differences += self.compare(_enter(old, old_properties[name]), _enter(new, new_properties[name]),
                                            where)
            elif name in old_properties:
                differences += self._property_removed(_enter(old, old_properties[name]), new, name, where)
            else:
                differences += self._property_added(old, _enter(new, new_properties[name]), name,
                                                    name in new_required, where)
        # Requiredness is compared for the properties of both schemas; an added one's is judged as it is added.
        for name in sorted(old_properties.keys() & new_properties.keys()):
            if name in new_required and name not in old_required:
                has_default = isinstance(new_properties[name], dict) and "default" in new_properties[name]
                kind = "REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED" if has_default else "REQUIRED_ATTRIBUTE_ADDED"
                differences.append(Difference(kind, f"{path}/required/{name}"))
            elif name in old_required and name not in new_required:
                differences.append(Difference("REQUIRED_ATTRIBUTE_REMOVED", f"{path}/required/{name}"))
        differences += self._additional(old, new, "additionalProperties", "ADDITIONAL_PROPERTIES", path)
        differences += self._dependency_differences(old, new, path)
        old_names, new_names = old.schema.get("propertyNames"), new.schema.get("propertyNames")
        if old_names is not None or new_names is not None:
            differences += self.compare(_enter(old, True if old_names is None else old_names),
                                        _enter(new, True if new_names is None else new_names), f"{path}/propertyNames")
        return differences

    def _property_removed(self, old_property: _Node, new: _Node, name: str, where: str) -> list[Difference]:
        cover = _property_cover(new, name)
        if cover is True:
            return [Difference("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", where)]
        if cover is False:
            if _deref(old_property).schema is False:
                return [Difference("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
            return [Difference("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
        if self.compatible(old_property, cover, where):
            return [Difference("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]
        return [Difference("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]

    def _property_added(self, old: _Node, new_property: _Node, name: str, required: bool,
                        where: str) -> list[Difference]:
        cover = _property_cover(old, name)
        if cover is True:
            if _is_empty(_deref(new_property).schema):
                return [Difference("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)]
            return [Difference("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", where)]
        differences: list[Difference] = []
        if cover is not False:
            covered = self.compatible(cover, new_property, where)
            differences.append(Difference(f"PROPERTY_ADDED_{'IS' if covered else 'NOT'}_COVERED_BY_PARTIALLY_OPEN_"
                                          "CONTENT_MODEL", where))
        if not required:
            kind = "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
        elif isinstance(new_property.schema, dict) and "default" in new_property.schema:
            kind = "REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL"
        else:
            kind = "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL"
        return [*differences, Difference(kind, where)]

    def _additional(self, old: _Node, new: _Node, keyword: str, prefix: str, path: str) -> list[Difference]:
        old_value, new_value = old.schema.get(keyword, True), new.schema.get(keyword, True)
        old_open, new_open = _is_empty(old_value), _is_empty(new_value)
        if old_open and new_open:
            return []
        if old_open:
            return [Difference(f"{prefix}_REMOVED" if new_value is False else f"{prefix}_NARROWED", path)]
        if new_open:
            return [Difference(f"{prefix}_ADDED" if old_value is False else f"{prefix}_EXTENDED", path)]
        if old_value is False:
            return [] if new_value is False else [Difference(f"{prefix}_ADDED", path)]
        if new_value is False:
            return [Difference(f"{prefix}_REMOVED", path)]
        return self.compare(_enter(old, old_value), _enter(new, new_value), f"{path}/{keyword}")

    def _dependency_differences(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old_arrays, old_schemas = _dependencies(old.schema)
        new_arrays, new_schemas = _dependencies(new.schema)
        differences: list[Difference] = []
        for name in sorted(old_arrays.keys() | new_arrays.keys()):
            where = f"{path}/dependencies/{name}"
            before, after = old_arrays.get(name), new_arrays.get(name)
            if before is None:
                differences.append(Difference("DEPENDENCY_ARRAY_ADDED", where))
            elif after is None:
                differences.append(Difference("DEPENDENCY_ARRAY_REMOVED", where))
            elif after > before:
                differences.append(Difference("DEPENDENCY_ARRAY_EXTENDED", where))
            elif after < before:
                differences.append(Difference("DEPENDENCY_ARRAY_NARROWED", where))
            elif after != before:
                differences.append(Difference("DEPENDENCY_ARRAY_CHANGED", where))
        for name in sorted(old_schemas.keys() | new_schemas.keys()):
            where = f"{path}/dependencies/{name}"
            if name not in old_schemas:
                differences.append(Difference("DEPENDENCY_SCHEMA_ADDED", where))
            elif name not in new_schemas:
                differences.append(Difference("DEPENDENCY_SCHEMA_REMOVED", where))
            else:
                differences += self.compare(_enter(old, old_schemas[name]), _enter(new, new_schemas[name]), where)
        return differences

    # Arrays.

    def _array_differences(self, old: _Node, new: _Node, path: str) -> list[Difference]:
        old_tuple, old_rest, old_rest_key = _array_shape(old.schema)
        new_tuple, new_rest, new_rest_key = _array_shape(new.schema)
        if old_tuple is None and new_tuple is None:
            if old_rest is None or new_rest is None:
                return [] if old_rest is new_rest else [
                    Difference("SCHEMA_ADDED" if old_rest is None else "SCHEMA_REMOVED", f"{path}/items")]
            return self.compare(_enter(old, old_rest), _enter(new, new_rest), f"{path}/items")
        if old_tuple is None or new_tuple is None:
            return [Difference("TYPE_CHANGED", f"{path}/items")]
        differences: list[Difference] = []
        for index in range(max(len(old_tuple), len(new_tuple))):
            where = f"{path}/items/{index}"
            if index < len(old_tuple) and index < len(new_tuple):
                differences += self.compare(_enter(old, old_tuple[index]), _enter(new, new_tuple[index]), where)
            elif index < len(old_tuple):
                differences += self._item_removed(_enter(old, old_tuple[index]), _enter(new, new_rest), where)
            else:
                differences += self._item_added(_enter(old, old_rest), _enter(new, new_tuple[index]), where)
        old_view = _Node({"rest": True if old_rest is None else old_rest}, old.resolver)
        new_view = _Node({"rest": True if new_rest is None else new_rest}, new.resolver)
        return differences + self._additional(old_view, new_view, "rest", "ADDITIONAL_ITEMS",
                                              f"{path}/{new_rest_key or old_rest_key}")

    def _item_removed(self, old_item: _Node, new_rest: _Node, where: str) -> list[Difference]:
        if new_rest.schema is None or _is_empty(new_rest.schema):
            return [Difference("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", where)]
        if new_rest.schema is False:
            if _deref(old_item).schema is False:
                return [Difference("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
            return [Difference("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", where)]
        if self.compatible(old_item, new_rest, where):
            return [Difference("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]
        return [Difference("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]

    def _item_added(self, old_rest: _Node, new_item: _Node, where: str) -> list[Difference]:
        if old_rest.schema is None or _is_empty(old_rest.schema):
            if _is_empty(_deref(new_item).schema):
                return [Difference("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", where)]
            return [Difference("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", where)]
        if old_rest.schema is False:
            return [Difference("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", where)]
        if self.compatible(old_rest, new_item, where):
            return [Difference("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]
        return [Difference("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", where)]


def _combinator(schema: Any) -> tuple[str, list[Any]] | None:
    if not isinstance(schema, dict):
        return None
    for criterion in _COMBINATORS:
        if isinstance(schema.get(criterion), list):
            return criterion, schema[criterion]
    return None


def _without_combinators(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return schema
    return {key: value for key, value in schema.items() if key not in _COMBINATORS}


def _distinct(members: list[Any]) -> list[Any]:
    """Subschemas without repeats (two equal alternatives are one)."""
    seen: set[str] = set()
    kept = []
    for member in members:
        key = _json_key(member)
        if key not in seen:
            seen.add(key)
            kept.append(member)
    return kept


def _matching_size(fitting: list[list[int]]) -> int:
    """The size of a maximum matching of a bipartite graph (``fitting[i]``: the right nodes left ``i`` fits)."""
    owner: dict[int, int] = {}

    def place(i: int, seen: set[int]) -> bool:
        for j in fitting[i]:
            if j not in seen:
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
        return False

    return sum(1 for i in range(len(fitting)) if place(i, set()))


def _type_differences(old: frozenset[str] | None, new: frozenset[str] | None, path: str) -> list[Difference]:
    if old == new or new is None:
        return [] if old == new else [Difference("TYPE_EXTENDED", path)]
    if old is None:
        return [Difference("TYPE_CHANGED", path)]
    several = len(old) > 1 or len(new) > 1
    if all(_accepts(new, kind) for kind in old):
        return [Difference("SUM_TYPE_EXTENDED" if several else "TYPE_EXTENDED", path)]
    if all(_accepts(old, kind) for kind in new):
        return [Difference("SUM_TYPE_NARROWED" if several else "TYPE_NARROWED", path)]
    return [Difference("TYPE_CHANGED", path)]


_IMPLYING_KEYWORDS = {
    "object": ("properties", "required", "additionalProperties", "patternProperties", "maxProperties",
               "minProperties", "dependencies", "dependentRequired", "dependentSchemas", "propertyNames"),
    "array": ("items", "prefixItems", "additionalItems", "maxItems", "minItems", "uniqueItems", "contains"),
    "string": ("maxLength", "minLength", "pattern"),
    "number": ("maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "multipleOf"),
}


def _implied_type(schema: dict[str, Any]) -> str | None:
    """The type an untyped schema's keywords imply, as Confluent's parser (everit) infers it."""
    for kind, keywords in _IMPLYING_KEYWORDS.items():
        if any(keyword in schema for keyword in keywords):
            return kind
    return None


def _enum_values(schema: dict[str, Any]) -> set[str] | None:
    if isinstance(schema.get("enum"), list):
        return {_json_key(value) for value in schema["enum"]}
    if "const" in schema:
        return {_json_key(schema["const"])}
    return None


def _enum_differences(old: dict[str, Any], new: dict[str, Any], path: str) -> list[Difference]:
    before, after = _enum_values(old), _enum_values(new)
    if before == after:
        return []
    if after is None or (before is not None and after > before):
        return [Difference("ENUM_ARRAY_EXTENDED", path)]
    if before is None or after < before:
        return [Difference("ENUM_ARRAY_NARROWED", path)]
    return [Difference("ENUM_ARRAY_CHANGED", path)]


def _bound_differences(old: Any, new: Any, prefix: str, path: str) -> list[Difference]:
    # Draft 4's exclusiveMaximum/exclusiveMinimum are booleans next to maximum/minimum.
    if isinstance(old, bool) or isinstance(new, bool):
        old, new = (old or None), (new or None)
    if old == new:
        return []
    if old is None:
        return [Difference(f"{prefix}_ADDED", path)]
    if new is None:
        return [Difference(f"{prefix}_REMOVED", path)]
    if _number(old) and _number(new):
        return [Difference(f"{prefix}_INCREASED" if new > old else f"{prefix}_DECREASED", path)]
    return []


def _pattern_differences(old: Any, new: Any, path: str) -> list[Difference]:
    if old == new:
        return []
    if old is None:
        return [Difference("PATTERN_ADDED", path)]
    return [Difference("PATTERN_REMOVED" if new is None else "PATTERN_CHANGED", path)]


def _divides(divisor: Any, value: Any) -> bool:
    try:
        return Decimal(str(value)) % Decimal(str(divisor)) == 0
    except (InvalidOperation, ArithmeticError):
        return False


def _multiple_of_differences(old: Any, new: Any, path: str) -> list[Difference]:
    if old == new:
        return []
    if old is None:
        return [Difference("MULTIPLE_OF_ADDED", path)]
    if new is None:
        return [Difference("MULTIPLE_OF_REMOVED", path)]
    if _divides(new, old):
        return [Difference("MULTIPLE_OF_REDUCED", path)]
    return [Difference("MULTIPLE_OF_EXPANDED" if _divides(old, new) else "MULTIPLE_OF_CHANGED", path)]


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _names(value: Any) -> set[str]:
    return {item for item in value if isinstance(item, str)} if isinstance(value, list) else set()


def _dependencies(schema: dict[str, Any]) -> tuple[dict[str, frozenset[str]], dict[str, Any]]:
    arrays: dict[str, frozenset[str]] = {}
    schemas: dict[str, Any] = {}
    for keyword in ("dependencies", "dependentRequired", "dependentSchemas"):
        for name, value in _dict(schema.get(keyword)).items():
            if isinstance(value, list):
                arrays[name] = frozenset(item for item in value if isinstance(item, str))
            elif isinstance(value, dict | bool):
                schemas[name] = value
    return arrays, schemas


def _property_cover(node: _Node, name: str) -> bool | _Node:
    """What an object schema says of a property it does not list: True (open), False (closed) or a schema."""
    for pattern, schema in _dict(node.schema.get("patternProperties")).items():
        try:
            matches = re.search(pattern, name) is not None
        except (re.error, TypeError, RecursionError):
            matches = False
        if matches:
            return True if _is_empty(schema) else _enter(node, schema)
    additional = node.schema.get("additionalProperties", True)
    if _is_empty(additional):
        return True
    if additional is False:
        return False
    return _enter(node, additional)


def _array_shape(schema: dict[str, Any]) -> tuple[list[Any] | None, Any, str | None]:
    """An array schema's tuple of positional items (if any) and the schema of the other items."""
    if isinstance(schema.get("prefixItems"), list):
        return schema["prefixItems"], schema.get("items"), "items"
    items = schema.get("items")
    if isinstance(items, list):
        return items, schema.get("additionalItems"), "additionalItems"
    return None, items, None
