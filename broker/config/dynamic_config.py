"""Dynamic broker configs (KIP-226) and group configs (KIP-848), as the config admin APIs change them.

Kafka keeps both as ConfigRecords in its metadata log; minikafka keeps them in one JSON file in the data
directory, `dynamic-configs.json`, rewritten atomically (temporary file, fsync, rename) on every change
and read at start, so they survive a restart:

    {"version": 1, "brokers": {"": {"log.retention.ms": "60000"}, "1": {...}},
     "groups": {"my-group": {"consumer.session.timeout.ms": "50000"}}}

Broker resources: the name "" is the cluster-wide default (DYNAMIC_DEFAULT_BROKER_CONFIG), this node's
id its own settings (DYNAMIC_BROKER_CONFIG). For one key the precedence is Kafka's: per-broker dynamic,
cluster-default dynamic, static (server.properties and the environment), Kafka's default. The keys
minikafka applies at runtime are Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker name of every
topic config (log.retention.ms, log.segment.bytes, log.cleanup.policy, message.max.bytes, ...). A change
recomputes the topic defaults at once, so a topic without its own override follows it (retention,
segment rolls, the cleaner, record size checks). Keys minikafka knows as broker configs but does not
change at runtime are refused as Kafka refuses its static keys (INVALID_REQUEST, "Cannot update these
configs dynamically: Set(...)"); keys it does not know (Kafka's thread pools, num.io.threads, ...) are
stored and described, as Kafka stores custom keys, and have no effect here.

Group resources: Kafka's GroupConfig keys, validated against the broker's group.consumer.* and
group.share.* bounds as GroupConfig.validate does. They are stored and described; the consumer.* keys
govern KIP-848 consumer groups and the share.* keys share groups (coordinator/share: auto offset reset,
isolation level, lock duration, session timeout, heartbeat interval).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
from minikafka.broker.config.config import BROKER_CONFIGS, BrokerConfig
from minikafka.broker.config.versions import profile_defaults
from minikafka.protocol.errors import ErrorCode, KafkaError
from minikafka.storage.checkpoint import write_atomically
from minikafka.storage.config import (
    BROKER_LOG_KEYS,
    TOPIC_CONFIGS,
    LogConfig,
    log_config_from_broker_properties,
    resolve_log_config,
)
from minikafka.storage.errors import InvalidConfig, KafkaStorageError
from minikafka.storage.manager import LogManager

_log = structlog.get_logger("minikafka.dynamic_config")

DYNAMIC_CONFIGS_FILE = "dynamic-configs.json"
_FORMAT_VERSION = 1

# Kafka's DescribeConfigsResponse.ConfigSource ids.
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
CLIENT_METRICS_CONFIG = 7
GROUP_CONFIG = 8

_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                 "class": 8, "password": 9}

# Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker-level name of every topic config.
DYNAMIC_LOG_KEYS = frozenset(spec.broker_synonym for spec in TOPIC_CONFIGS.values() if spec.broker_synonym)
# Broker keys minikafka knows that it reads only at start. Some are dynamic in Kafka (max.connections,
# log.cleaner.backoff.ms, producer.id.expiration.ms); refusing them is more honest than storing a value
# that would change nothing.
STATIC_ONLY_KEYS = frozenset((set(BROKER_CONFIGS) | BROKER_LOG_KEYS) - DYNAMIC_LOG_KEYS)


@dataclass(frozen=True, slots=True)
class _BrokerKey:
    type: str
    default: str | None
    doc: str | None


def _broker_keys() -> dict[str, _BrokerKey]:
    keys = {name: _BrokerKey(spec.type, spec.default, spec.doc) for name, spec in BROKER_CONFIGS.items()}
    for spec in TOPIC_CONFIGS.values():
        if spec.broker_synonym and spec.broker_synonym not in keys:
            keys[spec.broker_synonym] = _BrokerKey(spec.type, spec.default, spec.doc)
    return keys


BROKER_KEYS = _broker_keys()


@dataclass(frozen=True, slots=True)
class GroupConfigDef:
    name: str
    type: str
    default: str
    doc: str
    broker_default: str | None = None  # the broker key whose value describes an unset group config
    minimum: int | None = None  # ConfigDef.Range.atLeast
    allowed: tuple[str, ...] = ()  # ConfigDef.ValidString.in


# Kafka's GroupConfig; the defaults are GroupCoordinatorConfig's / ShareGroupConfig's.
GROUP_CONFIGS: dict[str, GroupConfigDef] = {d.name: d for d in (
    GroupConfigDef("consumer.heartbeat.interval.ms", "int", "5000",
                   "The heartbeat interval given to the members of a consumer group.",
                   broker_default="group.consumer.heartbeat.interval.ms", minimum=1),
    GroupConfigDef("consumer.session.timeout.ms", "int", "45000",
                   "The timeout to detect client failures when using the consumer group protocol.",
                   broker_default="group.consumer.session.timeout.ms", minimum=1),
    GroupConfigDef("share.auto.offset.reset", "string", "latest",
                   "The strategy to initialize the share-partition start offset.", allowed=("latest", "earliest")),
    GroupConfigDef("share.isolation.level", "string", "read_uncommitted",
                   "Controls how to read records written transactionally.",
                   allowed=("read_committed", "read_uncommitted")),
    GroupConfigDef("share.heartbeat.interval.ms", "int", "5000",
                   "The heartbeat interval given to the members of a share group.",
                   broker_default="group.share.heartbeat.interval.ms", minimum=1),
    GroupConfigDef("share.record.lock.duration.ms", "int", "30000",
                   "The record acquisition lock duration in milliseconds for share groups.",
                   broker_default="group.share.record.lock.duration.ms", minimum=1000),
    GroupConfigDef("share.session.timeout.ms", "int", "45000",
                   "The timeout to detect client failures when using the share group protocol.",
                   broker_default="group.share.session.timeout.ms", minimum=1),
)}

# The broker's bounds GroupConfig.validateValues checks against, with Kafka's defaults:
# (group config, bound key, default, True for a lower bound).
_GROUP_BOUNDS = (
    ("consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms", 5000, True),
    ("consumer.heartbeat.interval.ms", "group.consumer.max.heartbeat.interval.ms", 15000, False),
    ("consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms", 45000, True),
    ("consumer.session.timeout.ms", "group.consumer.max.session.timeout.ms", 60000, False),
    ("share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms", 5000, True),
    ("share.heartbeat.interval.ms", "group.share.max.heartbeat.interval.ms", 15000, False),
    ("share.session.timeout.ms", "group.share.min.session.timeout.ms", 45000, True),
    ("share.session.timeout.ms", "group.share.max.session.timeout.ms", 60000, False),
    ("share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms", 15000, True),
    ("share.record.lock.duration.ms", "group.share.max.record.lock.duration.ms", 60000, False),
)


def config_entry(name: str, value: str | None, source: int, kind: str, doc: str | None,
                 synonyms: list[dict[str, Any]], *, read_only: bool) -> dict[str, Any]:
    """One DescribeConfigs entry (the fields every version carries; the codec drops the newer ones).
    A password's value is null, in the entry and its synonyms, as Kafka answers."""
    sensitive = kind == "password"
    return {
        "name": name,
        "value": None if sensitive else value,
        "read_only": read_only,
        "config_source": source,
        "is_default": source == DEFAULT_CONFIG,
        "is_sensitive": sensitive,
        "synonyms": [{**synonym, "value": None} for synonym in synonyms] if sensitive else synonyms,
        "config_type": _CONFIG_TYPES.get(kind, 0),
        "documentation": doc,
    }


def invalid_request(message: str) -> KafkaError:
    return KafkaError(message, code=ErrorCode.invalid_request)


def _scala_set(names: list[str]) -> str:
    return f"Set({', '.join(names)})"


@dataclass(slots=True)
class DynamicConfigStore:
    """The dynamic broker and group configs of this node, persisted in `path`."""

    path: Path
    node_id: int
    static: Mapping[str, str]
    profile: Mapping[str, str]
    brokers: dict[str, dict[str, str]] = field(default_factory=dict)
    groups: dict[str, dict[str, str]] = field(default_factory=dict)
    # Client metrics subscriptions (CLIENT_METRICS resources, KIP-714), by name.
    client_metrics: dict[str, dict[str, str]] = field(default_factory=dict)

    @classmethod
    def load(cls, config: BrokerConfig) -> DynamicConfigStore:
        store = cls(config.data_dir / DYNAMIC_CONFIGS_FILE, config.node_id, dict(config.properties),
                    profile_defaults(config.kafka_version))
        if store.path.exists():
            saved = json.loads(store.path.read_text())
            store.brokers = {str(k): dict(v) for k, v in saved.get("brokers", {}).items()}
            store.groups = {str(k): dict(v) for k, v in saved.get("groups", {}).items()}
            store.client_metrics = {str(k): dict(v) for k, v in saved.get("client_metrics", {}).items()}
            _log.info("loaded dynamic configs", path=str(store.path), brokers=store.brokers,
                      groups=sorted(store.groups))
        return store

    def reset(self) -> None:
        """A broker reset: no dynamic broker, group or client-metrics config, the file gone; the static ones apply again
        (the server hands `log_defaults()` to the logs)."""
        self.brokers = {}
        self.groups = {}
        self.client_metrics = {}
        self.path.unlink(missing_ok=True)

    # --- broker configs -----------------------------------------------------------------

    @property
    def node_name(self) -> str:
        return str(self.node_id)

    def broker_layer(self, name: str) -> dict[str, str]:
        return dict(self.brokers.get(name, {}))

    def _effective_properties(self, brokers: Mapping[str, Mapping[str, str]]) -> dict[str, str]:
        return {**self.profile, **self.static, **brokers.get("", {}), **brokers.get(self.node_name, {})}

    def log_defaults(self) -> LogConfig:
        """The topic defaults: Kafka's, under the static properties, under the dynamic ones."""
        return log_config_from_broker_properties(self._effective_properties(self.brokers))

    def layers(self, key: str, *, per_broker: bool = True) -> list[tuple[str, int]]:
        """(value, source) of `key` at every level that sets it, most specific first (Kafka's synonyms)."""
        found: list[tuple[str, int]] = []
        if per_broker and key in self.brokers.get(self.node_name, {}):
            found.append((self.brokers[self.node_name][key], DYNAMIC_BROKER_CONFIG))
        if key in self.brokers.get("", {}):
            found.append((self.brokers[""][key], DYNAMIC_DEFAULT_BROKER_CONFIG))
        if key in self.static:
            found.append((self.static[key], STATIC_BROKER_CONFIG))
        known = BROKER_KEYS.get(key)
        if known is not None and known.default is not None:
            found.append((known.default, DEFAULT_CONFIG))
        return found

    def check_broker_resource(self, name: str) -> None:
        """Kafka's ConfigAdminManager.validateResourceNameIsCurrentNodeId ("" is the cluster default)."""
        if name == "":
            return
        try:
            node = int(name)
        except ValueError:
            raise invalid_request(f"Node id must be an integer, but it is: {name}") from None
        if node != self.node_id:
            raise invalid_request(f"Unexpected broker id, expected {self.node_id}, but received {name}")

    def alter_broker(self, logs: LogManager, name: str, wanted: Mapping[str, str], *, validate_only: bool) -> None:
        """Make `wanted` the dynamic configs of broker resource `name`, validated as Kafka's
        DynamicBrokerConfig.validateConfigs does, and apply the new topic defaults to every log."""
        self.check_broker_resource(name)
        refused = [key for key in wanted if key in STATIC_ONLY_KEYS]
        if refused:
            raise invalid_request(f"Cannot update these configs dynamically: {_scala_set(refused)}")
        brokers = {**self.brokers, name: dict(wanted)}
        if not wanted:
            del brokers[name]
        try:
            defaults = log_config_from_broker_properties(self._effective_properties(brokers))
            topic_configs = {meta.name: resolve_log_config(defaults, meta.configs) for meta in logs.topics()}
        except InvalidConfig as exc:
            # Kafka wraps the ConfigException of a broker config in InvalidRequestException (KAFKA-13609).
            raise invalid_request(str(exc)) from None
        if validate_only:
            return
        previous = self.brokers
        self.brokers = brokers
        try:
            self._save()
        except OSError as exc:
            self.brokers = previous
            raise KafkaStorageError(f"cannot write {self.path.name}: {exc.strerror or exc}") from exc
        logs.defaults = defaults
        for (topic, _partition), log in logs.partition_logs():
            config = topic_configs.get(topic)
            if config is not None:
                log.update_config(config)
        _log.info("altered dynamic broker configs", resource=name, configs=wanted)

    def broker_entries(self, name: str, keys: set[str] | None, include_synonyms: bool) -> list[dict[str, Any]]:
        """DescribeConfigs of a broker resource. This node: every broker config with its effective value.
        The cluster default (""): only the keys set there, as Kafka's ConfigHelper describes it."""
        per_broker = name != ""
        names = set(BROKER_KEYS) | set(self.brokers.get(self.node_name, {})) | set(self.brokers.get("", {}))
        if not per_broker:
            names = set(self.brokers.get("", {}))
        entries = []
        for key in sorted(names):
            if keys is not None and key not in keys:
                continue
            known = BROKER_KEYS.get(key)
            found = self.layers(key, per_broker=per_broker)
            value, source = found[0] if found else (None, DEFAULT_CONFIG)
            synonyms = [{"name": key, "value": v, "source": s} for v, s in found] if include_synonyms else []
            entries.append(config_entry(key, value, source, known.type if known else "string",
                                        known.doc if known else None, synonyms,
                                        read_only=key in STATIC_ONLY_KEYS))
        return entries

    def topic_entries(self, overrides: Mapping[str, str], keys: set[str] | None,
                      include_synonyms: bool) -> list[dict[str, Any]]:
        """DescribeConfigs of a topic: its override, else the broker's value at the most specific level."""
        entries = []
        for name, spec in sorted(TOPIC_CONFIGS.items()):
            if keys is not None and name not in keys:
                continue
            found: list[tuple[str, str, int]] = []
            if name in overrides:
                found.append((name, overrides[name], DYNAMIC_TOPIC_CONFIG))
            if spec.broker_synonym:
                found += [(spec.broker_synonym, v, s) for v, s in self.layers(spec.broker_synonym)]
            _, value, source = found[0] if found else (name, spec.default, DEFAULT_CONFIG)
            synonyms = [{"name": n, "value": v, "source": s} for n, v, s in found] if include_synonyms else []
            entries.append(config_entry(name, value, source, spec.type, spec.doc, synonyms, read_only=False))
        return entries

    # --- group configs ------------------------------------------------------------------

    def _group_bound(self, key: str, default: int) -> int:
        try:
            return int(self.static.get(key, default))
        except ValueError:
            return default

    def _validate_group(self, configs: Mapping[str, str]) -> None:
        """Kafka's GroupConfig.validate: known names, parseable values, then the broker's bounds."""
        for key in configs:
            if key not in GROUP_CONFIGS:
                raise InvalidConfig(f"Unknown group config name: {key}")
        values: dict[str, Any] = {}
        for key, spec in GROUP_CONFIGS.items():
            raw = configs.get(key, spec.default).strip()
            if spec.type == "int":
                try:
                    number = int(raw)
                except ValueError:
                    raise InvalidConfig(f"Invalid value {raw} for configuration {key}: Not a number of type INT") \
                        from None
                if spec.minimum is not None and number < spec.minimum:
                    raise InvalidConfig(f"Invalid value {raw} for configuration {key}: Value must be at least "
                                        f"{spec.minimum}")
                values[key] = number
            else:
                if spec.allowed and raw.lower() not in spec.allowed:
                    raise InvalidConfig(f"Invalid value {raw} for configuration {key}: String must be one of: "
                                        f"{', '.join(spec.allowed)}")
                values[key] = raw
        for key, bound_key, default, lower in _GROUP_BOUNDS:
            bound = self._group_bound(bound_key, default)
            if lower and values[key] < bound:
                raise InvalidConfig(f"{key} must be greater than or equal to {bound_key}")
            if not lower and values[key] > bound:
                raise InvalidConfig(f"{key} must be less than or equal to {bound_key}")
        for session, heartbeat in (("consumer.session.timeout.ms", "consumer.heartbeat.interval.ms"),
                                   ("share.session.timeout.ms", "share.heartbeat.interval.ms")):
            if values[session] <= values[heartbeat]:
                raise InvalidConfig(f"{session} must be greater than {heartbeat}")

    def alter_group(self, group: str, wanted: Mapping[str, str], *, validate_only: bool) -> None:
        if not group:
            # Kafka's ControllerConfigurationValidator.validateGroupName
            raise invalid_request("Default group resources are not allowed.")
        self._validate_group(wanted)
        if validate_only:
            return
        previous = self.groups
        self.groups = {**self.groups, group: dict(wanted)}
        if not wanted:
            del self.groups[group]
        try:
            self._save()
        except OSError as exc:
            self.groups = previous
            raise KafkaStorageError(f"cannot write {self.path.name}: {exc.strerror or exc}") from exc
        _log.info("altered group configs", group=group, configs=wanted)

    def group_layer(self, group: str) -> dict[str, str]:
        return dict(self.groups.get(group, {}))

    def group_entries(self, group: str, keys: set[str] | None, include_synonyms: bool) -> list[dict[str, Any]]:
        stored = self.groups.get(group, {})
        entries = []
        for name, spec in sorted(GROUP_CONFIGS.items()):
            if keys is not None and name not in keys:
                continue
            found = [(stored[name], GROUP_CONFIG)] if name in stored else []
            # Kafka describes an unset group config with the broker's group coordinator setting.
            default = self.static.get(spec.broker_default, spec.default) if spec.broker_default else spec.default
            found.append((default, DEFAULT_CONFIG))
            value, source = found[0]
            synonyms = [{"name": name, "value": v, "source": s} for v, s in found] if include_synonyms else []
            entries.append(config_entry(name, value, source, spec.type, spec.doc, synonyms, read_only=False))
        return entries

    # --- client metrics subscriptions -------------------------------------------------------

    def alter_client_metrics(self, name: str, wanted: Mapping[str, str], *, validate_only: bool) -> None:
        """Make `wanted` the configs of subscription `name` (none: delete it), validated as Kafka's
        ControllerConfigurationValidator does with ClientMetricsConfigs.validate."""
        # Imported at the first use, as the client metrics manager is: most brokers never see a subscription.
        from minikafka.coordinator.client_metrics.configs import validate as validate_client_metrics

        validate_client_metrics(name, wanted)
        if validate_only:
            return
        previous = self.client_metrics
        self.client_metrics = {**self.client_metrics, name: dict(wanted)}
        if not wanted:
            del self.client_metrics[name]
        try:
            self._save()
        except OSError as exc:
            self.client_metrics = previous
            raise KafkaStorageError(f"cannot write {self.path.name}: {exc.strerror or exc}") from exc
        _log.info("altered client metrics subscription", subscription=name, configs=wanted)

    def client_metrics_layer(self, name: str) -> dict[str, str]:
        return dict(self.client_metrics.get(name, {}))

    def client_metrics_entries(self, name: str, keys: set[str] | None,
                               include_synonyms: bool) -> list[dict[str, Any]]:
        """Kafka's ConfigHelper for CLIENT_METRICS: every key, set (CLIENT_METRICS_CONFIG) or its default; a
        subscription that does not exist is all defaults."""
        from minikafka.coordinator.client_metrics.configs import CLIENT_METRICS_CONFIGS, list_value

        stored = self.client_metrics.get(name, {})
        entries = []
        for key, spec in sorted(CLIENT_METRICS_CONFIGS.items()):
            if keys is not None and key not in keys:
                continue
            value, source = (stored[key], CLIENT_METRICS_CONFIG) if key in stored else (spec.default, DEFAULT_CONFIG)
            if spec.type == "list":
                value = ",".join(list_value(value))  # as ConfigDef.convertToString prints a parsed list
            synonyms = [{"name": key, "value": value, "source": source}] if include_synonyms and key in stored else []
            entries.append(config_entry(key, value, source, spec.type, spec.doc, synonyms, read_only=False))
        return entries

    # --- persistence --------------------------------------------------------------------

    def _save(self) -> None:
        document: dict[str, Any] = {"version": _FORMAT_VERSION, "brokers": self.brokers, "groups": self.groups}
        if self.client_metrics:
            document["client_metrics"] = self.client_metrics
        write_atomically(self.path, json.dumps(document, indent=1, sort_keys=True).encode())
