"""Client quotas (KIP-546): what AlterClientQuotas sets and DescribeClientQuotas shows, kept in the data dir.

Kafka keeps them as ClientQuotaRecords in its metadata log; minikafka keeps them in `client-quotas.json`,
rewritten atomically on every change and read at start, so they survive a restart:

    {"version": 1, "quotas": [{"entity": {"client-id": "slow"}, "values": {"producer_byte_rate": 1024.0}}]}

An entity maps entity types (`user`, `client-id`, `ip`) to a name, or to null for the type's default.
Validation is Kafka's ClientQuotaControlManager's, in its order and with its messages; matching a
DescribeClientQuotas filter is Kafka's ClientQuotasImage.describe. Which quota applies to a connection
(`applicable`) is Kafka's default quota callback (ClientQuotaManager.DefaultQuotaCallback): the most
specific of user+client-id, user, client-id, each falling back to its defaults.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import structlog
from minikafka.broker.config.quota_file import CLIENT_QUOTAS_FILE
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.checkpoint import write_atomically
from minikafka.storage.errors import KafkaStorageError

_log = structlog.get_logger("minikafka.client_quotas")

_FORMAT_VERSION = 1

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
CONTROLLER_MUTATION_RATE = "controller_mutation_rate"
CONNECTION_CREATION_RATE = "connection_creation_rate"

# Kafka's QuotaConfigs: the keys of user and client-id entities (userConfigs adds nothing a quota API
# may set), and of ip entities, with their ConfigDef types.
CLIENT_KEYS: Mapping[str, str] = {PRODUCER_BYTE_RATE: "long", CONSUMER_BYTE_RATE: "long",
                                  REQUEST_PERCENTAGE: "double", CONTROLLER_MUTATION_RATE: "double"}
IP_KEYS: Mapping[str, str] = {CONNECTION_CREATION_RATE: "int"}

# DescribeClientQuotasRequest's match types.
MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2

Entity = tuple[tuple[str, str | None], ...]  # (type, name) pairs sorted by type; a name of None: the default


def entity_of(pairs: Iterable[tuple[str, str | None]]) -> Entity:
    """An entity as Kafka's ClientQuotaEntity keys it: a map, so a type named twice keeps its last name."""
    return tuple(sorted(dict(pairs).items()))


def entity_text(entity: Entity) -> str:
    """Kafka's ClientQuotaEntity.toString."""
    entries = ", ".join(f"{kind}={name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{entries}}})"


class InvalidQuota(KafkaError):
    def __init__(self, message: str, code: ErrorCode = ErrorCode.invalid_request) -> None:
        super().__init__(message, code=code)


@dataclass(frozen=True, slots=True)
class Alteration:
    entity: Entity
    # key -> new value, or None to remove it
    ops: tuple[tuple[str, float | None], ...]


@dataclass(frozen=True, slots=True)
class AlterResult:
    entity: Entity
    code: ErrorCode
    message: str | None


def _valid_ip(name: str | None) -> bool:
    if name is None:
        return True
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    try:  # Kafka's InetAddress.getByName resolves host names too
        socket.getaddrinfo(name, None)
        return True
    except (OSError, UnicodeError):
        return False


def _check_entity(entity: Entity) -> Mapping[str, str]:
    """Kafka's validateEntity then configKeysForEntityType: the keys the entity may set."""
    if not entity:
        raise InvalidQuota("Invalid empty client quota entity")
    for kind, name in entity:
        if kind not in (USER, CLIENT_ID, IP):
            raise InvalidQuota(f"Unhandled client quota entity type: {kind}")
        if name is not None and name == "":
            raise InvalidQuota(f"Empty {kind} not supported")
    kinds = {kind for kind, _ in entity}
    if IP in kinds:
        if kinds != {IP}:
            raise InvalidQuota("Invalid quota entity combination, IP entity shouldnot be combined with User or "
                               "ClientId")
        name = dict(entity)[IP]
        if not _valid_ip(name):
            raise InvalidQuota(f"{name} is not a valid IP or resolvable host.")
        return IP_KEYS
    return CLIENT_KEYS


def _check_value(keys: Mapping[str, str], key: str, value: float) -> None:
    """Kafka's validateQuotaKeyValue: a known key; a whole number for the integer types."""
    kind = keys.get(key)
    if kind is None:
        raise InvalidQuota(f"Invalid configuration key {key}")
    if kind != "double":
        epsilon = 1e-6
        if abs(float(int(value + epsilon)) - value) > epsilon:
            raise InvalidQuota(f"Configuration {key} must be a Long value")


@dataclass(slots=True)
class ClientQuotaStore:
    """Every entity's quota values, persisted in `path`; `listeners` hear of each applied change."""

    path: Path
    quotas: dict[Entity, dict[str, float]] = field(default_factory=dict)
    listeners: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def load(cls, data_dir: Path) -> ClientQuotaStore:
        store = cls(data_dir / CLIENT_QUOTAS_FILE)
        if store.path.exists():
            saved = json.loads(store.path.read_text())
            for item in saved.get("quotas", []):
                store.quotas[entity_of(item["entity"].items())] = {k: float(v) for k, v in item["values"].items()}
            _log.info("loaded client quotas", path=str(store.path), entities=len(store.quotas))
        return store

    def value(self, entity: Entity, key: str) -> float | None:
        values = self.quotas.get(entity)
        return None if values is None else values.get(key)

    def has_key(self, key: str) -> bool:
        return any(key in values for values in self.quotas.values())

    # --- AlterClientQuotas -------------------------------------------------------------------

    def alter(self, alterations: Iterable[Alteration], *, validate_only: bool) -> list[AlterResult]:
        """Kafka's ClientQuotaControlManager.alterClientQuotas: each entity validated on its own; what
        passes is applied together (one atomic batch of records in Kafka, one file write here)."""
        results: list[AlterResult] = []
        decided: set[Entity] = set()
        changed = {entity: dict(values) for entity, values in self.quotas.items()}
        for alteration in alterations:
            entity = alteration.entity
            wanted: dict[str, float | None] = {}
            duplicate_key = False
            for key, value in alteration.ops:
                if key in wanted:
                    duplicate_key = True
                else:
                    wanted[key] = value
            # Kafka records the duplicate-key error, then finds the entity already answered and says so.
            if duplicate_key or entity in decided:
                results.append(AlterResult(entity, ErrorCode.invalid_request,
                                           f"Ignoring duplicate entity {entity_text(entity)}"))
                decided.add(entity)
                continue
            decided.add(entity)
            try:
                keys = _check_entity(entity)
                for key, value in wanted.items():
                    if value is not None:
                        _check_value(keys, key, value)
            except InvalidQuota as exc:
                results.append(AlterResult(entity, exc.error_code, str(exc)))
                continue
            values = changed.setdefault(entity, {})
            for key, value in wanted.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = float(value)
            if not values:
                del changed[entity]
            results.append(AlterResult(entity, ErrorCode.none, None))
        if not validate_only and changed != self.quotas:
            self._replace(changed)
        return results

    def _replace(self, quotas: dict[Entity, dict[str, float]]) -> None:
        previous = self.quotas
        self.quotas = quotas
        try:
            self._save()
        except OSError as exc:
            self.quotas = previous
            raise KafkaStorageError(f"cannot write {self.path.name}: {exc.strerror or exc}") from exc
        _log.info("altered client quotas", entities=len(quotas))
        for listener in tuple(self.listeners):
            listener()

    def reset(self) -> None:
        """No quota, as on an empty data directory (the broker reset): the file removed, listeners told."""
        self.quotas = {}
        self.path.unlink(missing_ok=True)
        for listener in tuple(self.listeners):
            listener()

    def _sorted(self) -> list[tuple[Entity, dict[str, float]]]:
        """By entity, a default (None) before the names of its type."""
        return sorted(self.quotas.items(), key=lambda item: [(kind, name is not None, name or "")
                                                             for kind, name in item[0]])

    def _save(self) -> None:
        document = {"version": _FORMAT_VERSION, "quotas": [
            {"entity": dict(entity), "values": values} for entity, values in self._sorted()]}
        write_atomically(self.path, (json.dumps(document, indent=1) + "\n").encode())

    # --- DescribeClientQuotas ----------------------------------------------------------------

    def describe(self, components: Iterable[tuple[str, int, str | None]], strict: bool) -> list[
            tuple[Entity, dict[str, float]]]:
        """Kafka's ClientQuotasImage.describe: the filter checked (InvalidQuota for a bad one), then every
        entity it matches."""
        exact: dict[str, str | None] = {}
        specified: set[str] = set()
        for kind, match_type, match in components:
            if kind == "":
                raise InvalidQuota("Invalid empty entity type.")
            if kind in exact or kind in specified:
                raise InvalidQuota(f"Entity type {kind} cannot appear more than once in the filter.")
            if kind not in (IP, USER, CLIENT_ID):
                raise InvalidQuota(f"Unsupported entity type {kind}", ErrorCode.unsupported_version)
            if match_type == MATCH_EXACT:
                if match is None:
                    raise InvalidQuota("Request specified MATCH_TYPE_EXACT, but set match string to null.")
                exact[kind] = match
            elif match_type == MATCH_DEFAULT:
                if match is not None:
                    raise InvalidQuota("Request specified MATCH_TYPE_DEFAULT, but also specified a match string.")
                exact[kind] = None
            elif match_type == MATCH_SPECIFIED:
                if match is not None:
                    raise InvalidQuota("Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.")
                specified.add(kind)
            else:
                raise InvalidQuota(f"Unknown match type {match_type}")
        named = set(exact) | specified
        if IP in named and named & {USER, CLIENT_ID}:
            raise InvalidQuota("Invalid entity filter component combination. IP filter component should not be "
                               "used with user or clientId filter component.")
        if not named:
            return [] if strict else [(entity, dict(values)) for entity, values in self._sorted()]
        found = []
        for entity, values in self._sorted():
            names = dict(entity)
            if any(kind not in names or names[kind] != name for kind, name in exact.items()):
                continue
            if any(kind not in names for kind in specified):
                continue
            if strict and len(names) != len(named):
                continue
            found.append((entity, dict(values)))
        return found

    # --- which quota applies -----------------------------------------------------------------

    def applicable(self, key: str, user: str, client_id: str) -> tuple[float | None, tuple[str, str]]:
        """The quota `key` of a user's client, and the (user, client-id) the quota is kept per: what Kafka's
        default callback gives as the sensor's metric tags, a default standing for each name it matches."""
        tags = self._tags(key, user, client_id)
        return self._limit(key, tags), tags

    def _tags(self, key: str, user: str, client_id: str) -> tuple[str, str]:
        def has(*pairs: tuple[str, str | None]) -> bool:
            return self.value(entity_of(pairs), key) is not None

        if has((USER, user), (CLIENT_ID, client_id)) or has((USER, user), (CLIENT_ID, None)):
            return user, client_id
        if has((USER, user)):
            return user, ""
        if has((USER, None), (CLIENT_ID, client_id)) or has((USER, None), (CLIENT_ID, None)):
            return user, client_id
        if has((USER, None)):
            return user, ""
        return "", client_id

    def _limit(self, key: str, tags: tuple[str, str]) -> float | None:
        user, client_id = tags
        if user and client_id:
            chain: tuple[Entity, ...] = (
                entity_of([(USER, user), (CLIENT_ID, client_id)]), entity_of([(USER, user), (CLIENT_ID, None)]),
                entity_of([(USER, None), (CLIENT_ID, client_id)]), entity_of([(USER, None), (CLIENT_ID, None)]))
        elif user:
            chain = (entity_of([(USER, user)]), entity_of([(USER, None)]))
        elif client_id:
            chain = (entity_of([(CLIENT_ID, client_id)]), entity_of([(CLIENT_ID, None)]))
        else:
            return None
        for entity in chain:
            found = self.value(entity, key)
            if found is not None:
                return found
        return None
