"""Client metrics subscriptions: the CLIENT_METRICS config resource (type 16), as Kafka's
ClientMetricsConfigs defines and validates it.

A subscription is a named set of three configs:
- `metrics`: metric name prefixes, comma-separated; empty (the default) subscribes to none, `*` to all.
- `interval.ms`: how often a matching client pushes, 100 to 3600000 (default 300000).
- `match`: `selector=regex` items, comma-separated; a client matches when every regex matches the whole
  of that attribute of it. Selectors: client_instance_id, client_id, client_software_name,
  client_software_version, client_source_address, client_source_port. Empty (the default) matches
  every client.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from minikafka.coordinator.errors import InvalidClientMetricsConfig
from minikafka.protocol.errors import ErrorCode

METRICS, INTERVAL_MS, MATCH = "metrics", "interval.ms", "match"
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 300_000
MIN_INTERVAL_MS, MAX_INTERVAL_MS = 100, 3_600_000
MATCH_SELECTORS = frozenset({"client_instance_id", "client_id", "client_software_name", "client_software_version",
                             "client_source_address", "client_source_port"})


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    type: str  # Kafka's ConfigDef type name
    default: str
    doc: str


# Kafka's ClientMetricsConfigs.CONFIG, with its defaults as DescribeConfigs shows them.
CLIENT_METRICS_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    ConfigKey(METRICS, "list", "", "Telemetry metric name prefix list"),
    ConfigKey(INTERVAL_MS, "int", str(DEFAULT_INTERVAL_MS), "Metrics push interval in milliseconds"),
    ConfigKey(MATCH, "list", "", "Client match criteria"),
)}


@dataclass(frozen=True, slots=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, attributes: Mapping[str, str | None]) -> bool:
        """Every pattern matches the whole attribute (Java's Matcher.matches); a missing one matches nothing."""
        for selector, pattern in self.match:
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def list_value(value: str | None) -> list[str]:
    """A LIST config's items, as Kafka's ConfigDef parses them: empty is none, items trimmed."""
    text = (value or "").strip()
    return [item.strip() for item in text.split(",")] if text else []


def _interval(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise InvalidClientMetricsConfig(f"Invalid value {value} for configuration {INTERVAL_MS}: Not a number of "
                                         "type INT", code=ErrorCode.invalid_config) from None


def _illegal(pattern: str) -> InvalidClientMetricsConfig:
    return InvalidClientMetricsConfig(f"Illegal client matching pattern: {pattern}", code=ErrorCode.invalid_config)


def parse_match(patterns: list[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """`selector=regex` items; anything else is INVALID_CONFIG ("Illegal client matching pattern: ...")."""
    parsed: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        # Java's String.split("=") drops trailing empty parts: "client_id=" has one part, as has "=x" two.
        parts = pattern.split("=")
        while parts and parts[-1] == "":
            parts.pop()
        selector = parts[0].strip() if parts else ""
        if len(parts) != 2 or selector not in MATCH_SELECTORS:
            raise _illegal(pattern)
        try:
            parsed[selector] = re.compile(parts[1].strip())
        except re.error:
            raise _illegal(pattern) from None
    return tuple(parsed.items())


def validate(name: str, properties: Mapping[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: the subscription name, the keys, the interval's range and the
    match patterns."""
    if not name:
        raise InvalidClientMetricsConfig("Subscription name can't be empty")
    for key in properties:
        if key not in CLIENT_METRICS_CONFIGS:
            raise InvalidClientMetricsConfig(f"Unknown client metrics configuration: {key}")
    if INTERVAL_MS in properties:
        interval = _interval(properties[INTERVAL_MS])
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise InvalidClientMetricsConfig(f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                                             f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)")
    parse_match(list_value(properties.get(MATCH)))


def subscription(name: str, properties: Mapping[str, str]) -> Subscription:
    validate(name, properties)
    return Subscription(name, frozenset(list_value(properties.get(METRICS))),
                        _interval(properties.get(INTERVAL_MS, str(DEFAULT_INTERVAL_MS))),
                        parse_match(list_value(properties.get(MATCH))))
