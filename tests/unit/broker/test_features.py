"""broker/wire/features.py: the features ApiVersions reports per profile, and its tie to `transaction.version`."""

from __future__ import annotations

import pytest
from minikafka.broker.config.config import ConfigError, build_config
from minikafka.broker.wire.features import TRANSACTION_VERSION_BUILT, features, supported_for


def test_transaction_version_property_accepts_exactly_what_is_built() -> None:
    top = build_config(environ={}, overrides=[f"transaction.version={TRANSACTION_VERSION_BUILT}"])
    assert top.transaction_version == TRANSACTION_VERSION_BUILT
    with pytest.raises(ConfigError, match=r"transaction\.version"):
        build_config(environ={}, overrides=[f"transaction.version={TRANSACTION_VERSION_BUILT + 1}"])


ELR = "eligible.leader.replicas.version"


def test_level_0_is_not_finalized_and_set_levels_are() -> None:
    assert features("4.1", 0, served=()).finalized == {"metadata.version": 27, ELR: 1}
    found = features("4.1", 1, served={68})
    assert found.finalized == {"metadata.version": 27, "transaction.version": 1, "group.version": 1, ELR: 1}
    assert found.supported["group.version"] == (0, 1)


def test_4_2_reports_what_a_4_2_broker_finalizes_for_the_apis_served() -> None:
    """Kafka 4.2 finalizes metadata.version 4.2-IV1 (29), share.version 1 (KIP-932 production) and
    streams.version 1 (KIP-1071); each group feature only while its heartbeat API is served."""
    found = features("4.2", 2, served={68, 76, 88})
    assert found.finalized == {"metadata.version": 29, "transaction.version": 2, "group.version": 1, ELR: 1,
                               "share.version": 1, "streams.version": 1}
    assert found.supported == {"metadata.version": (7, 29), "kraft.version": (0, 1), "transaction.version": (0, 2),
                               "group.version": (0, 1), ELR: (0, 1), "share.version": (0, 1),
                               "streams.version": (0, 1)}
    only_consumer_groups = features("4.2", 0, served={68})
    assert only_consumer_groups.finalized == {"metadata.version": 29, "group.version": 1, ELR: 1}
    assert "share.version" not in only_consumer_groups.supported


def test_share_groups_are_a_4_2_feature() -> None:
    """share.version 1 was a preview in 4.1 (its latest production level 0): not reported, served or not."""
    assert "share.version" not in features("4.1", 0, served={76}).supported


def test_v3_omits_supported_minimum_0_and_v4_keeps_it() -> None:
    found = features("4.0", 0, served=())
    assert supported_for(3, found) == {"metadata.version": (7, 25)}
    assert supported_for(4, found) == {"metadata.version": (7, 25), "kraft.version": (0, 1),
                                       "transaction.version": (0, TRANSACTION_VERSION_BUILT)}


@pytest.mark.parametrize(("profile", "level"), [("3.3", 7), ("3.x", 21), ("3.9", 21)])
def test_3_x_reports_metadata_version_only(profile: str, level: int) -> None:
    found = features(profile, 1, served={68, 76})
    assert found.supported == {"metadata.version": (1, level)} and found.finalized == {"metadata.version": level}


@pytest.mark.parametrize("profile", ["2.8", "3.0", "3.2"])
def test_releases_before_kip_778_report_nothing(profile: str) -> None:
    found = features(profile, 1, served={68, 76})
    assert (found.supported, found.finalized, found.epoch) == ({}, {}, -1)
