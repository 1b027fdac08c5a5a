"""Kafka version profiles: what ApiVersions advertises, and which defaults apply, as a given Kafka release.

`--kafka-version` (`minikafka.kafka.version`) picks one; the broker then serves, for each API, the
intersection of what it implements and what that release's broker advertised, and refuses the rest
like any unsupported version (an API the release lacked is unknown to it, so the connection closes).

The ranges are the ApiVersions answers of real Apache Kafka brokers (ZooKeeper or KRaft mode, the
client-facing keys only), as recorded by kafka-python in `kafka/protocol/broker_version_data.py`
(BROKER_API_VERSIONS, "copied from brokers via api_versions_response"). Kafka 4.x advertises Produce
from v0 although it refuses v0-2 (KIP-896; kept for old librdkafka, KAFKA-18659): our Produce handler
accepts v3 and up in every profile, so only what is advertised differs, as in Kafka. The KIP-848 APIs
are listed as the recordings show them: ConsumerGroupHeartbeat (68) v0 from 3.7, ConsumerGroupDescribe
(69) v0 from 3.8, v0-1 of both from 4.0 (in 3.x the protocol was an early-access preview, but its
brokers advertised it, and a client asking for group.protocol=consumer tries it).
Kafka 4.1 serves Produce v13 (topics by id) but keeps OffsetCommit and OffsetFetch v10 (topics by id)
unstable, advertised only under `unstable.api.versions.enable` (KAFKA-14690/14691; stable from 4.2), so
its rows stop at v9 as its broker's answer does. Kafka 4.2's row is its broker's recorded answer too:
ListOffsets v11 (KIP-1023), WriteTxnMarkers v2, OffsetCommit/OffsetFetch v10 stable, ShareFetch and
ShareAcknowledge v2 (KIP-1206, KIP-1222), DescribeShareGroupOffsets v1; AlterPartitionReassignments v1
(KIP-860) came with 4.1. The admin APIs DescribeLogDirs (v0 gone in 4.0, KIP-896), ElectLeaders and the
partition reassignments are in every release listed.
Client telemetry (KIP-714): GetTelemetrySubscriptions (71) and PushTelemetry (72) v0 came with 3.7, but
a Kafka broker advertises them only when a telemetry receiver plugin is configured, so the recordings
lack them; the registry serves them only with `minikafka.client.telemetry.enabled`
(broker/wire/registry.py). ListClientMetricsResources (74 v0, KIP-1000) came with 3.7 too, on KRaft brokers
only: the 3.x recordings are of ZooKeeper-mode brokers (they list LeaderAndIsr and the other ZooKeeper
inter-broker APIs), so 74 starts with the 4.0 row; 4.1 renamed it ListConfigResources and added v1
(KIP-1142).
"""

from __future__ import annotations

from collections.abc import Mapping

from minikafka.protocol.api_keys import VersionRange

KafkaRanges = Mapping[int, tuple[int, int]]

# Release -> API key -> (min, max) its broker advertised.
KAFKA_API_VERSIONS: Mapping[str, KafkaRanges] = {
    "2.8": {
        0: (0, 9), 1: (0, 12), 2: (0, 6), 3: (0, 11), 8: (0, 8), 9: (0, 7), 10: (0, 3), 11: (0, 7), 12: (0, 4),
        13: (0, 4), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0),
        35: (0, 2), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 2), 30: (0, 2), 31: (0, 2), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.0": {
        0: (0, 9), 1: (0, 12), 2: (0, 7), 3: (0, 11), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 7), 12: (0, 4),
        13: (0, 4), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 2), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 2), 30: (0, 2), 31: (0, 2), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.1": {
        0: (0, 9), 1: (0, 13), 2: (0, 7), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 7), 12: (0, 4),
        13: (0, 4), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 2), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 2), 30: (0, 2), 31: (0, 2), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.2": {
        0: (0, 9), 1: (0, 13), 2: (0, 7), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 3), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 2), 30: (0, 2), 31: (0, 2), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.3": {
        0: (0, 9), 1: (0, 13), 2: (0, 7), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.4": {
        0: (0, 9), 1: (0, 13), 2: (0, 7), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.5": {
        0: (0, 9), 1: (0, 15), 2: (0, 8), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 3), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.6": {
        0: (0, 9), 1: (0, 15), 2: (0, 8), 3: (0, 12), 8: (0, 8), 9: (0, 8), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 4), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 0), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
    "3.7": {
        0: (0, 10), 1: (0, 16), 2: (0, 8), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 4), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 4), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 4), 23: (0, 4), 24: (0, 4), 25: (0, 3), 26: (0, 3), 27: (0, 1), 28: (0, 3), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 0),
        68: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        71: (0, 0), 72: (0, 0),
    },
    "3.8": {
        0: (0, 11), 1: (0, 16), 2: (0, 8), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 5), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 3), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 5), 23: (0, 4), 24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        68: (0, 0), 69: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        71: (0, 0), 72: (0, 0),
    },
    "3.9": {
        0: (0, 11), 1: (0, 17), 2: (0, 9), 3: (0, 12), 8: (0, 9), 9: (0, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 5), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (0, 7), 20: (0, 6), 21: (0, 2),
        22: (0, 5), 23: (0, 4), 24: (0, 5), 25: (0, 4), 26: (0, 4), 27: (0, 1), 28: (0, 4), 32: (0, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 1), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        68: (0, 0), 69: (0, 0),
        35: (0, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (0, 3), 30: (0, 3), 31: (0, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        71: (0, 0), 72: (0, 0),
    },
    "4.0": {
        0: (0, 12), 1: (4, 17), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (2, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
        22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1), 28: (0, 5), 32: (1, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 1),
        68: (0, 1), 69: (0, 1), 75: (0, 0),
        35: (1, 4), 43: (0, 2), 45: (0, 0), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (1, 3), 30: (1, 3), 31: (1, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        71: (0, 0), 72: (0, 0), 74: (0, 0),
    },
    "4.1": {
        0: (0, 13), 1: (4, 18), 2: (1, 10), 3: (0, 13), 8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
        22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 1), 28: (0, 5), 32: (1, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 2),
        68: (0, 1), 69: (0, 1), 75: (0, 0),
        35: (1, 4), 43: (0, 2), 45: (0, 1), 46: (0, 0),
        48: (0, 1), 49: (0, 1),
        29: (1, 3), 30: (1, 3), 31: (1, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
        71: (0, 0), 72: (0, 0), 74: (0, 1),
        # Share groups in preview (KIP-932): the APIs were advertised, share.version was not finalized.
        76: (1, 1), 77: (1, 1), 78: (1, 1), 79: (1, 1), 90: (0, 0), 91: (0, 0), 92: (0, 0),
    },
    "4.2": {
        0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
        13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
        22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 32: (1, 4), 33: (0, 2),
        37: (0, 3), 42: (0, 2), 44: (0, 1), 47: (0, 0), 60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 2),
        68: (0, 1), 69: (0, 1), 75: (0, 0),
        74: (0, 1), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 90: (0, 1), 91: (0, 0), 92: (0, 0),
        48: (0, 1), 49: (0, 1), 35: (1, 4), 43: (0, 2), 45: (0, 1), 46: (0, 0),
        # A Kafka broker advertises the telemetry APIs only when a client-telemetry receiver is configured
        # (KIP-714), so kafka-python's recordings lack them; these are their only versions.
        71: (0, 0), 72: (0, 0),
        29: (1, 3), 30: (1, 3), 31: (1, 3), 36: (0, 2), 50: (0, 0), 51: (0, 0),
    },
}

NEWEST = "4.2"
# "3.x" names the 3 line as its last release: what a user running "some 3.x" can count on is at most that.
ALIASES: Mapping[str, str] = {"3.x": "3.9"}
# Broker defaults a profile changes, as Kafka property names (the properties given still win). Before
# 4.0 (KIP-1030) a record's CreateTime could be any time ahead of the broker clock.
_DEFAULTS_BEFORE_4_0: Mapping[str, str] = {"log.message.timestamp.after.max.ms": str(2**63 - 1)}


class UnknownKafkaVersion(ValueError):
    pass


def profile_names() -> list[str]:
    return [*KAFKA_API_VERSIONS, *ALIASES]


def resolve(version: str) -> str:
    """The release a `--kafka-version` value names."""
    release = ALIASES.get(version, version)
    if release not in KAFKA_API_VERSIONS:
        raise UnknownKafkaVersion(f"unknown Kafka version {version!r}: one of {', '.join(profile_names())}")
    return release


def profile_defaults(version: str) -> Mapping[str, str]:
    """The broker properties whose default differs in that release from minikafka's (Kafka 4.x's)."""
    major = int(resolve(version).split(".")[0])
    return _DEFAULTS_BEFORE_4_0 if major < 4 else {}


def limit(api_key: int, ours: VersionRange, version: str) -> VersionRange | None:
    """`ours` cut to what the release advertised for `api_key`; None if it had no such API or no common
    version."""
    theirs = KAFKA_API_VERSIONS[resolve(version)].get(api_key)
    if theirs is None:
        return None
    low, high = max(ours.min, theirs[0]), min(ours.max, theirs[1])
    return VersionRange(low, high) if low <= high else None
