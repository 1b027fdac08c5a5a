"""The Confluent Schema Registry REST API over the registry model (coordinator/schemas/registry.py).

    GET    /                                        {}
    GET    /schemas[?subjectPrefix&deleted&latestOnly]  every subject version (as GET .../versions/{v})
    GET    /schemas/types                           the formats this broker has
    GET    /schemas/ids/{id}[?subject=S&format=F]   {"schema", "schemaType" (not for AVRO), "references"}
    GET    /schemas/ids/{id}/schema                 the schema text alone
    GET    /schemas/ids/{id}/versions[?deleted]     [{"subject", "version"}]
    GET    /schemas/ids/{id}/subjects[?deleted]     [subject]
    GET    /subjects[?deleted&subjectPrefix=P]      [subject]
    POST   /subjects/{s}[?normalize&deleted]        look a schema up: {"subject", "id", "version", "schema"}
    DELETE /subjects/{s}[?permanent]                [version]
    GET    /subjects/{s}/versions[?deleted]         [version]
    POST   /subjects/{s}/versions[?normalize]       register: {"id"} (IMPORT mode: "id", "version" in the body)
    GET    /subjects/{s}/versions/{v}[?deleted]     {"subject", "version", "id", "schemaType", "references", "schema"}
    GET    /subjects/{s}/versions/{v}/schema        the schema text alone
    GET    /subjects/{s}/versions/{v}/referencedby  [id]
    DELETE /subjects/{s}/versions/{v}[?permanent]   version
    POST   /compatibility/subjects/{s}/versions[/{v}][?verbose&normalize]
                                                    {"is_compatible", "messages" (verbose)}
    GET|PUT|DELETE /config[/{s}][?defaultToGlobal]  {"compatibilityLevel"} / PUT {"compatibility"}
    GET|PUT|DELETE /mode[/{s}][?force]              {"mode"}
    GET    /contexts                                ["."]

{v} is a number or `latest` (or -1). Errors are Confluent's bodies, {"error_code": N, "message": ...},
with the HTTP status the code's first three digits name. Request bodies are JSON, sent as
application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json, application/json or
application/octet-stream (or with no Content-Type); another type is answered 415.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Callable
from typing import Any

from minikafka.broker.registry.http import Request, Response, error
from minikafka.coordinator.schemas.formats import FORMATS
from minikafka.coordinator.schemas.records import Reference, SchemaValue
from minikafka.coordinator.schemas.registry import RegisteredSchema, SchemaRegistry, parse_version
from minikafka.coordinator.schemas.registry_errors import InvalidSchemaError, RegistryError

_BODY_TYPES = frozenset({"application/vnd.schemaregistry.v1+json", "application/vnd.schemaregistry+json",
                         "application/json", "application/octet-stream", ""})


_TYPES_ORDER = {"JSON": 0, "PROTOBUF": 1, "AVRO": 2}


class _Text:
    """An answer that is a schema's own text, sent as it is (GET .../schema), as Confluent sends it."""

    def __init__(self, text: str) -> None:
        self.text = text


class _BadRequest(Exception):
    def __init__(self, response: Response) -> None:
        super().__init__(response.body)
        self.response = response


def status_of(error_code: int) -> int:
    return error_code // 100 if error_code >= 10000 else error_code


def _flag(request: Request, name: str) -> bool:
    return request.query.get(name, "false").strip().lower() == "true"


def _json_body(request: Request) -> dict[str, Any]:
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type not in _BODY_TYPES:
        raise _BadRequest(error(415, 415, "HTTP 415 Unsupported Media Type"))
    try:
        body = json.loads(request.body or b"null")
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _BadRequest(error(400, 400, f"Unrecognized request body: {exc}")) from None
    if not isinstance(body, dict):
        raise _BadRequest(error(422, 422, "Unrecognized request body: expected a JSON object"))
    return body


def _schema_request(request: Request) -> tuple[str, str, tuple[Reference, ...], dict[str, Any]]:
    body = _json_body(request)
    text = body.get("schema")
    if not isinstance(text, str) or not text.strip():
        raise InvalidSchemaError("Empty schema")
    schema_type = body.get("schemaType") or "AVRO"
    if not isinstance(schema_type, str):
        raise InvalidSchemaError(f"Invalid schema type {schema_type}")
    try:
        references = tuple(Reference(str(r["name"]), str(r["subject"]), int(r["version"]))
                           for r in body.get("references") or ())
    except (KeyError, TypeError, ValueError) as exc:
        raise _BadRequest(error(422, 422, f"Unrecognized field in references: {exc}")) from None
    return schema_type.upper(), text, references, body


def _schema_json(schema: RegisteredSchema | SchemaValue) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if schema.schema_type != "AVRO":
        out["schemaType"] = schema.schema_type
    if schema.references:
        out["references"] = [reference.as_json() for reference in schema.references]
    out["schema"] = schema.schema
    return out


def _version_json(stored: SchemaValue) -> dict[str, Any]:
    return {"subject": stored.subject, "version": stored.version, "id": stored.id, **_schema_json(stored)}


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise _BadRequest(error(404, 40403 if what == "id" else 404, f"HTTP 404 Not Found ({what} {text!r})")) \
            from None


class RegistryApi:
    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry

    async def handle(self, request: Request) -> Response:
        segments = [urllib.parse.unquote(part) for part in request.path.strip("/").split("/")] \
            if request.path.strip("/") else []
        try:
            status, body = self._route(request, segments)
            if isinstance(body, _Text):
                return Response(status, None, raw=body.text.encode())
            return Response(status, body)
        except RegistryError as exc:
            return error(status_of(exc.error_code), exc.error_code, exc.message)
        except _BadRequest as exc:
            return exc.response

    def _route(self, request: Request, segments: list[str]) -> tuple[int, Any]:
        if not segments:
            return 200, {}
        head, rest = segments[0], segments[1:]
        routes: dict[str, Callable[[Request, list[str]], tuple[int, Any]]] = {
            "schemas": self._schemas, "subjects": self._subjects, "config": self._config, "mode": self._mode,
            "compatibility": self._compatibility, "contexts": self._contexts,
        }
        route = routes.get(head)
        if route is None:
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        return route(request, rest)

    @staticmethod
    def _allow(request: Request, *methods: str) -> None:
        if request.method not in methods:
            raise _BadRequest(error(405, 405, "HTTP 405 Method Not Allowed"))

    def _contexts(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        self._allow(request, "GET")
        return 200, ["."]

    def _schemas(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        self._allow(request, "GET")
        registry = self.registry
        if not rest:
            return 200, [_version_json(v) for v in registry.all_versions(
                request.query.get("subjectPrefix", ""), _flag(request, "deleted"), _flag(request, "latestOnly"))]
        if rest == ["types"]:
            # Confluent lists JSON, PROTOBUF and AVRO, in that order; this broker lists the formats it has.
            return 200, sorted(FORMATS, key=lambda name: (_TYPES_ORDER.get(name, len(_TYPES_ORDER)), name))
        if len(rest) < 2 or rest[0] != "ids" or len(rest) > 3:
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        schema_id = _int(rest[1], "id")
        deleted = _flag(request, "deleted")
        if len(rest) == 2:
            return 200, _schema_json(registry.schema_by_id(schema_id, request.query.get("subject") or None))
        if rest[2] == "schema":
            return 200, _Text(registry.schema_by_id(schema_id, request.query.get("subject") or None).schema)
        if rest[2] == "versions":
            return 200, [{"subject": s, "version": v} for s, v in registry.versions_of_id(schema_id, deleted)]
        if rest[2] == "subjects":
            return 200, sorted({s for s, _v in registry.versions_of_id(schema_id, deleted)})
        raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))

    def _subjects(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        registry = self.registry
        deleted = _flag(request, "deleted")
        if not rest:
            self._allow(request, "GET")
            return 200, registry.subjects(deleted, request.query.get("subjectPrefix", ""))
        subject = rest[0]
        if len(rest) == 1:
            self._allow(request, "POST", "DELETE")
            if request.method == "DELETE":
                return 200, registry.delete_subject(subject, _flag(request, "permanent"))
            schema_type, text, references, _body = _schema_request(request)
            found = registry.lookup(subject, schema_type, text, references, _flag(request, "normalize"), deleted)
            return 200, _version_json(found)
        if rest[1] != "versions" or len(rest) > 4:
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        if len(rest) == 2:
            self._allow(request, "GET", "POST")
            if request.method == "GET":
                return 200, registry.versions(subject, deleted)
            return 200, self._register(request, subject)
        version = rest[2]
        if len(rest) == 4:
            self._allow(request, "GET")
            if rest[3] == "referencedby":
                return 200, registry.referenced_by(subject, version)
            if rest[3] == "schema":
                return 200, _Text(registry.version(subject, version, deleted).schema)
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        self._allow(request, "GET", "DELETE")
        if request.method == "DELETE":
            return 200, registry.delete_version(subject, version, _flag(request, "permanent"))
        return 200, _version_json(registry.version(subject, version, deleted))

    def _register(self, request: Request, subject: str) -> dict[str, Any]:
        schema_type, text, references, body = _schema_request(request)
        schema_id, version = body.get("id"), body.get("version")
        if schema_id is not None and not isinstance(schema_id, int):
            raise _BadRequest(error(422, 422, f"Unrecognized field: id {schema_id!r}"))
        if version is not None:
            version = parse_version(version)
        stored = self.registry.register(subject, schema_type, text, references, _flag(request, "normalize"),
                                        schema_id=schema_id, version=version)
        return {"id": stored.id}

    def _compatibility(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        self._allow(request, "POST")
        if len(rest) not in (3, 4) or rest[0] != "subjects" or rest[2] != "versions":
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        schema_type, text, references, _body = _schema_request(request)
        version = rest[3] if len(rest) == 4 else None
        messages = self.registry.check_compatibility(rest[1], version, schema_type, text, references,
                                                     _flag(request, "normalize"))
        answer: dict[str, Any] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            answer["messages"] = messages
        return 200, answer

    def _config(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        if len(rest) > 1:
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        subject = rest[0] if rest else None
        self._allow(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            level = self.registry.config(subject, _flag(request, "defaultToGlobal"))
            return 200, {"compatibilityLevel": level.value}
        if request.method == "DELETE":
            return 200, {"compatibilityLevel": self.registry.delete_config(subject).value}
        body = _json_body(request)
        level = self.registry.set_config(subject, body.get("compatibility", body.get("compatibilityLevel")))
        return 200, {"compatibility": level.value}

    def _mode(self, request: Request, rest: list[str]) -> tuple[int, Any]:
        if len(rest) > 1:
            raise _BadRequest(error(404, 404, "HTTP 404 Not Found"))
        subject = rest[0] if rest else None
        self._allow(request, "GET", "PUT", "DELETE")
        if request.method == "GET":
            return 200, {"mode": self.registry.mode(subject, _flag(request, "defaultToGlobal") or subject is None)}
        if request.method == "DELETE":
            if subject is None:
                raise _BadRequest(error(405, 405, "HTTP 405 Method Not Allowed"))
            return 200, {"mode": self.registry.delete_mode(subject)}
        body = _json_body(request)
        return 200, {"mode": self.registry.set_mode(subject, body.get("mode"), _flag(request, "force"))}
