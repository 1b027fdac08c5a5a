"""Config entries as DescribeConfigs / CreateTopics report them: value, source, synonyms, type.

Sources (Kafka's ConfigSource): 1 DYNAMIC_TOPIC_CONFIG, 4 STATIC_BROKER_CONFIG, 5 DEFAULT_CONFIG.
"""

from __future__ import annotations

from typing import Any

from minikafka.storage.config import TOPIC_CONFIGS

from .config import BROKER_CONFIGS, BrokerConfig

DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5

# Kafka's DescribeConfigsResponse.ConfigType ids.
_CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
                 "class": 8, "password": 9}


def _entry(name: str, value: str | None, source: int, kind: str, doc: str | None,
           synonyms: list[dict[str, Any]], *, read_only: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_default": source == DEFAULT_CONFIG,
        "is_sensitive": kind == "password",
        "synonyms": synonyms,
        "config_type": _CONFIG_TYPES.get(kind, 0),
        "documentation": doc,
    }


def topic_config_entries(config: BrokerConfig, overrides: dict[str, str],
                         keys: set[str] | None = None, include_synonyms: bool = False) -> list[dict[str, Any]]:
    entries = []
    for name, spec in sorted(TOPIC_CONFIGS.items()):
        if keys is not None and name not in keys:
            continue
        synonyms: list[dict[str, Any]] = []
        broker_key = spec.broker_synonym
        broker_value = config.properties.get(broker_key) if broker_key else None
        if name in overrides:
            value, source = overrides[name], DYNAMIC_TOPIC_CONFIG
            synonyms.append({"name": name, "value": value, "source": DYNAMIC_TOPIC_CONFIG})
        elif broker_value is not None:
            value, source = broker_value, STATIC_BROKER_CONFIG
        else:
            value, source = spec.default, DEFAULT_CONFIG
        if broker_value is not None and broker_key:
            synonyms.append({"name": broker_key, "value": broker_value, "source": STATIC_BROKER_CONFIG})
        if broker_key and spec.default is not None:
            synonyms.append({"name": broker_key, "value": spec.default, "source": DEFAULT_CONFIG})
        entries.append(_entry(name, value, source, spec.type, spec.doc, synonyms if include_synonyms else []))
    return entries


def broker_config_entries(config: BrokerConfig, keys: set[str] | None = None,
                          include_synonyms: bool = False) -> list[dict[str, Any]]:
    rows: dict[str, tuple[str, str | None, str]] = {
        name: (spec.type, spec.default, spec.doc) for name, spec in BROKER_CONFIGS.items()
    }
    for spec in TOPIC_CONFIGS.values():
        if spec.broker_synonym and spec.broker_synonym not in rows:
            rows[spec.broker_synonym] = (spec.type, spec.default, spec.doc)
    entries = []
    for name, (kind, default, doc) in sorted(rows.items()):
        if keys is not None and name not in keys:
            continue
        given = config.properties.get(name)
        value, source = (given, STATIC_BROKER_CONFIG) if given is not None else (default, DEFAULT_CONFIG)
        synonyms = [{"name": name, "value": value, "source": source}] if include_synonyms else []
        entries.append(_entry(name, value, source, kind, doc, synonyms, read_only=True))
    return entries
