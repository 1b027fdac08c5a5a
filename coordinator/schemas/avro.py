"""The AVRO schema format: fastavro validates a schema; names are resolved here into one tree, which gives
the canonical text (the registry's equality) and Avro's schema resolution rules (compatibility).

Canonical text: the schema as JSON with every name fully qualified, primitives written as their bare
name, the keys of each object in one order and no whitespace, and a named type written in full where
it is first defined (a type from a reference only by its name). Two schemas that differ only in
spelling (key order, whitespace, `{"type": "int"}` for `"int"`, a namespace spelled as a dotted name)
are the same schema; a different default, doc or alias makes a different one, as in Confluent, whose
equality is Avro's `Schema.toString()`.

Compatibility follows the Avro specification's schema resolution, as Avro's SchemaCompatibility
checks it: a reader field missing from the writer needs a default; a writer field the reader lacks is
skipped; int -> long -> float -> double and string <-> bytes promote; the writer's enum symbols must
be in the reader's unless the reader has a default symbol; fixed sizes match; each branch of a
writer's union must be readable; names match, or the reader lists the writer's name as an alias.
Messages are Confluent's verbose ones: `{errorType:'...', description:'...', additionalInfo:'...'}`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType
from minikafka.coordinator.schemas.errors import InvalidSchema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# Writer type -> the reader types it can be read as (Avro's promotions).
_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
# The key order of each object in the canonical text; other keys (custom properties) follow, sorted.
_KEY_ORDER = ("type", "name", "namespace", "doc", "aliases", "fields", "symbols", "default", "order", "items",
              "values", "size", "logicalType", "precision", "scale")

Tree = Any  # str (a primitive or a named type's full name), list (a union) or dict


def _fullname(name: str, namespace: str | None) -> str:
    if "." in name or not namespace:
        return name
    return f"{namespace}.{name}"


def _namespace_of(fullname: str) -> str | None:
    return fullname.rpartition(".")[0] or None


@dataclass
class _Names:
    """Named types known while expanding: full name -> definition (the dict in the tree)."""

    known: dict[str, dict[str, Any]] = field(default_factory=dict)

    def resolve(self, name: str, namespace: str | None) -> str:
        for candidate in (_fullname(name, namespace), name):
            if candidate in self.known:
                return candidate
        raise InvalidSchema(f"Invalid schema: unknown type {name!r}")


def _expand(node: Any, namespace: str | None, names: _Names) -> Tree:
    """The schema as a tree with full names: a named type is a dict the first time and its name after."""
    if isinstance(node, str):
        return node if node in PRIMITIVES else names.resolve(node, namespace)
    if isinstance(node, list):
        return [_expand(branch, namespace, names) for branch in node]
    if not isinstance(node, dict) or "type" not in node:
        raise InvalidSchema(f"Invalid schema: {json.dumps(node)[:200]} is not an Avro schema")
    kind = node["type"]
    if isinstance(kind, (dict, list)):
        return _expand(kind, namespace, names)
    if kind in NAMED:
        return _expand_named(node, namespace, names)
    if kind == "array":
        items = _expand(node.get("items"), namespace, names)
        return {**_props(node, {"type", "items"}), "type": "array", "items": items}
    if kind == "map":
        return {**_props(node, {"type", "values"}), "type": "map", "values": _expand(node.get("values"), namespace,
                                                                                    names)}
    if kind in PRIMITIVES:
        props = _props(node, {"type"})
        return {"type": kind, **props} if props else kind
    return names.resolve(kind, namespace)


def _props(node: dict[str, Any], skip: set[str]) -> dict[str, Any]:
    return {key: value for key, value in node.items() if key not in skip}


def _expand_named(node: dict[str, Any], namespace: str | None, names: _Names) -> dict[str, Any]:
    name = node.get("name")
    if not isinstance(name, str):
        raise InvalidSchema("Invalid schema: a named type needs a name")
    explicit = node.get("namespace")
    fullname = _fullname(name, explicit if explicit is not None else namespace)
    own_namespace = _namespace_of(fullname)
    out: dict[str, Any] = {**_props(node, {"type", "name", "namespace", "fields", "aliases"}),
                           "type": node["type"], "name": fullname}
    if "aliases" in node:
        out["aliases"] = [_fullname(alias, own_namespace) for alias in node["aliases"]]
    names.known[fullname] = out
    if node["type"] in ("record", "error"):
        out["fields"] = [
            {**_props(f, {"type", "name"}), "name": f["name"], "type": _expand(f["type"], own_namespace, names)}
            for f in node.get("fields", [])
        ]
    return out


def _canonical_field(field_tree: dict[str, Any]) -> dict[str, Any]:
    ordered = {"name": field_tree["name"], "type": _canonical(field_tree["type"])}
    for key in ("doc", "default", "order", "aliases"):
        if key in field_tree:
            ordered[key] = field_tree[key]
    ordered.update(sorted((k, v) for k, v in field_tree.items() if k not in ordered))
    return ordered


def _canonical(tree: Tree) -> Any:
    if isinstance(tree, list):
        return [_canonical(branch) for branch in tree]
    if not isinstance(tree, dict):
        return tree
    ordered = {key: tree[key] for key in _KEY_ORDER if key in tree}
    ordered.update(sorted((key, value) for key, value in tree.items() if key not in ordered))
    if "fields" in ordered and ordered["type"] in ("record", "error"):
        ordered["fields"] = [_canonical_field(f) for f in ordered["fields"]]
    for key in ("items", "values"):
        if key in ordered:
            ordered[key] = _canonical(ordered[key])
    return ordered


@dataclass
class AvroSchema:
    canonical: str
    tree: Tree = field(compare=False, repr=False)
    names: Mapping[str, dict[str, Any]] = field(compare=False, repr=False)

    def normalized(self) -> str:
        # The canonical text already spells every schema one way (full names, fixed key order).
        return self.canonical

    def incompatibilities(self, old: Any) -> list[str]:
        if not isinstance(old, AvroSchema):
            return ["Incompatible because of different schema type"]  # Confluent's words
        checker = _Resolution(self.names, old.names)
        checker.check(self.tree, old.tree, "")
        return checker.messages


class AvroFormat:
    name = "AVRO"

    def parse(self, text: str, references: Mapping[str, str]) -> AvroSchema:
        named: dict[str, Any] = {}
        names = _Names()
        pending = list(references.values())
        # A reference may use another one's types: parse them until none is left or none parses.
        while pending:
            failed = []
            for reference in pending:
                try:
                    _parse_one(reference, named, names)
                except InvalidSchema:
                    failed.append(reference)
            if len(failed) == len(pending):
                _parse_one(failed[0], named, names)  # raises with the reason
            pending = failed
        tree = _parse_one(text, named, names)
        # Types from references stay names in the tree (_expand writes a known name as the name).
        canonical = json.dumps(_canonical(tree), separators=(",", ":"), ensure_ascii=False)
        return AvroSchema(canonical, tree, dict(names.known))


def _parse_one(text: str, named: dict[str, Any], names: _Names) -> Tree:
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    try:
        fastavro.parse_schema(document, named_schemas=named, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    try:
        return _expand(document, None, names)
    except (KeyError, TypeError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None


def _message(error_type: str, description: str, additional: str) -> str:
    return f"{{errorType:'{error_type}', description:'{description}', additionalInfo:'{additional}'}}"


def _kind(tree: Tree) -> str:
    if isinstance(tree, list):
        return "union"
    if isinstance(tree, dict):
        return "record" if tree["type"] == "error" else str(tree["type"])
    return str(tree)


class _Resolution:
    """Can a reader (the new schema) read what a writer (the old one) wrote? Collects what stops it."""

    def __init__(self, reader_names: Mapping[str, dict[str, Any]], writer_names: Mapping[str, dict[str, Any]]):
        self._reader_names = reader_names
        self._writer_names = writer_names
        self._in_progress: set[tuple[str, str]] = set()
        self.messages: list[str] = []

    def _deref(self, tree: Tree, names: Mapping[str, dict[str, Any]]) -> Tree:
        if isinstance(tree, str) and tree not in PRIMITIVES:
            return names[tree]
        if isinstance(tree, dict) and tree["type"] in PRIMITIVES:
            return tree["type"]  # a primitive with properties (a logical type) reads as its primitive
        return tree

    def check(self, reader: Tree, writer: Tree, path: str) -> bool:
        reader = self._deref(reader, self._reader_names)
        writer = self._deref(writer, self._writer_names)
        if isinstance(writer, list):
            results = [self.check(reader, branch, f"{path}/{i}") for i, branch in enumerate(writer)]
            return all(results)
        if isinstance(reader, list):
            return self._reader_union(reader, writer, path)
        reader_kind, writer_kind = _kind(reader), _kind(writer)
        if reader_kind != writer_kind:
            if reader_kind in _PROMOTIONS.get(writer_kind, ()):
                return True
            return self._fail("TYPE_MISMATCH", f"The type (path '{path or '/'}') of a field in the new schema does "
                                               "not match with the old schema",
                              f"reader type: {reader_kind.upper()} not compatible with writer type: "
                              f"{writer_kind.upper()}")
        if reader_kind in PRIMITIVES:
            return True
        if reader_kind == "array":
            return self.check(reader["items"], writer["items"], f"{path}/items")
        if reader_kind == "map":
            return self.check(reader["values"], writer["values"], f"{path}/values")
        if not self._names_match(reader, writer, path):
            return False
        if reader_kind == "fixed":
            if reader.get("size") != writer.get("size"):
                return self._fail("FIXED_SIZE_MISMATCH", f"The size of FIXED type field at path '{path}/size' in the "
                                  "new schema does not match with the old schema", f"expected: {writer.get('size')}, "
                                  f"found: {reader.get('size')}")
            return True
        if reader_kind == "enum":
            return self._enum(reader, writer, path)
        return self._record(reader, writer, path)

    def _fail(self, error_type: str, description: str, additional: str) -> bool:
        self.messages.append(_message(error_type, description, additional))
        return False

    def _names_match(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        if _short(reader["name"]) == _short(writer["name"]) or writer["name"] in reader.get("aliases", ()):
            return True
        return self._fail("NAME_MISMATCH", f"The name of the schema has changed (path '{path}/name')",
                          f"expected: {writer['name']}")

    def _reader_union(self, reader: list[Tree], writer: Tree, path: str) -> bool:
        for branch in reader:
            probe = _Resolution(self._reader_names, self._writer_names)
            probe._in_progress = set(self._in_progress)
            if probe.check(branch, writer, path):
                return True
        return self._fail("MISSING_UNION_BRANCH", "The new schema is missing a type inside a union field at path "
                          f"'{path or '/'}' in the old schema", f"reader union lacking writer type: "
                          f"{_kind(writer).upper()}")

    def _enum(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        missing = [symbol for symbol in writer.get("symbols", []) if symbol not in reader.get("symbols", [])]
        if missing and "default" not in reader:
            return self._fail("MISSING_ENUM_SYMBOLS", f"The new schema is missing enum symbols '{missing}' at path "
                              f"'{path}/symbols' in the old schema", ", ".join(missing))
        return True

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> bool:
        pair = (reader["name"], writer["name"])
        if pair in self._in_progress:
            return True  # a recursive type: assumed readable while its check is under way
        self._in_progress.add(pair)
        ok = True
        writer_fields = {f["name"]: f for f in writer.get("fields", [])}
        for index, reader_field in enumerate(reader.get("fields", [])):
            writer_field = writer_fields.get(reader_field["name"])
            for alias in reader_field.get("aliases", ()):
                writer_field = writer_field or writer_fields.get(alias)
            if writer_field is None:
                if "default" not in reader_field:
                    ok = self._fail("READER_FIELD_MISSING_DEFAULT_VALUE",
                                    f"The field '{reader_field['name']}' at path '{path}/fields/{index}' in the new "
                                    "schema has no default value and is missing in the old schema",
                                    reader_field["name"]) and ok
                continue
            ok = self.check(reader_field["type"], writer_field["type"], f"{path}/fields/{index}/type") and ok
        self._in_progress.discard(pair)
        return ok


def _short(fullname: str) -> str:
    # Avro's resolution matches unqualified names ("both schemas are records with the same unqualified name").
    return fullname.rpartition(".")[2]


AVRO_FORMAT = AvroFormat()
