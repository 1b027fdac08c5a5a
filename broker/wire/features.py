"""Feature flags (KIP-584) as ApiVersions v3+ reports them: supported ranges and finalized levels.

Kafka's brokers report `metadata.version` (the KRaft metadata format, a level per release), and from
4.0 `kraft.version`, `transaction.version` and `group.version`; 4.1 adds
`eligible.leader.replicas.version`, 4.2 `share.version` and `streams.version`. A feature's supported
maximum is its latest production level in that release (Kafka's BrokerFeatures without
`unstable.feature.versions.enable`), and a freshly formatted cluster finalizes every feature at that
level. There is no KRaft quorum here, so the levels come from the Kafka version profile and from what
this broker really implements:
- `metadata.version`: the release's latest production level (MetadataVersion.LATEST_PRODUCTION: 4.2 is
  4.2-IV1, level 29), supported from the minimum that release could run (3.0-IV1 before 4.0, 3.3-IV3
  from 4.0).
- `transaction.version`: supported up to TRANSACTION_VERSION_BUILT; finalized at the broker's
  `transaction.version` property (BrokerConfig.transaction_version), the level whose
  `__transaction_state` records it writes. Level 0 is not finalized, as in Kafka (a feature at 0
  has no FeatureLevelRecord).
- The group features follow the API that serves them, so each lights up when its handler is registered
  and not before: `group.version` 1 (KIP-848) with ConsumerGroupHeartbeat, `share.version` 1
  (KIP-932, production from 4.2) with ShareGroupHeartbeat, `streams.version` 1 (KIP-1071, production
  from 4.2) with StreamsGroupHeartbeat, which this broker does not serve, so a 4.2 profile reports no
  `streams.version` where Kafka 4.2 finalizes it at 1.
- `eligible.leader.replicas.version`: 1 from 4.1 (KIP-966, production and on by default for new
  clusters from 4.1). Metadata answers carry the ELR fields, empty: replicas hold no copies of their
  own here, so none is ever out of sync while online.
- `kraft.version`: 0-1 supported (4.0+), not finalized (a static quorum is level 0).
- `share.version`: 1 means KIP-932 share groups, production-ready from Kafka 4.2 (earlier releases had
  them in preview, off unless enabled); finalized at 1 from the 4.2 profile on, only if this node
  serves ShareGroupHeartbeat.
Features whose supported maximum is 0 are left out (nothing to negotiate). Before ApiVersions v4,
features whose minimum is 0 are left out of SupportedFeatures, as Kafka does (KAFKA-17011: older
clients reject a minimum of 0).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from minikafka.broker.config.versions import resolve

# Highest transaction.version this broker implements (2: KIP-890). The `transaction.version` property
# accepts exactly 0 to this (tests/unit/broker/test_features.py holds the two together).
TRANSACTION_VERSION_BUILT = 2
# Highest group.version with the KIP-848 consumer protocol.
GROUP_VERSION_CONSUMER_PROTOCOL = 1
CONSUMER_GROUP_HEARTBEAT_KEY = 68
SHARE_GROUP_HEARTBEAT_KEY = 76
STREAMS_GROUP_HEARTBEAT_KEY = 88
# Feature -> (the API whose handler serves it, its level then, the first release where that level is
# production and finalized by default).
GROUP_FEATURES: dict[str, tuple[int, int, tuple[int, int]]] = {
    "group.version": (CONSUMER_GROUP_HEARTBEAT_KEY, GROUP_VERSION_CONSUMER_PROTOCOL, (4, 0)),
    "share.version": (SHARE_GROUP_HEARTBEAT_KEY, 1, (4, 2)),
    "streams.version": (STREAMS_GROUP_HEARTBEAT_KEY, 1, (4, 2)),
}
# eligible.leader.replicas.version 1 (KIP-966) is production from this release.
ELR_FROM = (4, 1)
# Our answer's FinalizedFeaturesEpoch: the levels never change while the broker runs (Kafka uses the
# metadata log offset that finalized them; any value >= 0 says "valid").
FINALIZED_FEATURES_EPOCH = 0

# Release -> (lowest, latest production) metadata.version level (MetadataVersion feature levels). The
# feature was introduced by KIP-778 in 3.3; releases before it report no features at all.
METADATA_VERSION_LEVELS: dict[str, tuple[int, int]] = {
    "3.3": (1, 7), "3.4": (1, 8), "3.5": (1, 11), "3.6": (1, 14), "3.7": (1, 19), "3.8": (1, 20),
    "3.9": (1, 21), "4.0": (7, 25), "4.1": (7, 27), "4.2": (7, 29),
}


@dataclass(frozen=True, slots=True)
class Features:
    supported: dict[str, tuple[int, int]]  # name -> (min, max)
    finalized: dict[str, int]  # name -> level (> 0)
    epoch: int  # -1 when nothing is finalized


def features(kafka_version: str, transaction_version: int, served: Collection[int]) -> Features:
    """What a broker of that profile, with that transaction.version and serving the API keys `served`,
    reports."""
    release = resolve(kafka_version)
    levels = METADATA_VERSION_LEVELS.get(release)
    if levels is None:
        return Features({}, {}, -1)
    supported = {"metadata.version": levels}
    finalized = {"metadata.version": levels[1]}
    version = tuple(int(part) for part in release.split("."))
    if version >= (4, 0):
        supported |= {"kraft.version": (0, 1), "transaction.version": (0, TRANSACTION_VERSION_BUILT)}
        finalized |= {"transaction.version": transaction_version}
    if version >= ELR_FROM:
        supported |= {"eligible.leader.replicas.version": (0, 1)}
        finalized |= {"eligible.leader.replicas.version": 1}
    for name, (api_key, level, since) in GROUP_FEATURES.items():
        if version >= since:
            top = level if api_key in served else 0
            supported |= {name: (0, top)}
            finalized |= {name: top}
    supported = {name: (low, high) for name, (low, high) in supported.items() if high > 0}
    finalized = {name: level for name, level in finalized.items() if level > 0}
    return Features(supported, finalized, FINALIZED_FEATURES_EPOCH)


def supported_for(version: int, found: Features) -> dict[str, tuple[int, int]]:
    """SupportedFeatures as ApiVersions `version` carries them (v0-3 omit a minimum of 0)."""
    if version >= 4:
        return found.supported
    return {name: bounds for name, bounds in found.supported.items() if bounds[0] > 0}
