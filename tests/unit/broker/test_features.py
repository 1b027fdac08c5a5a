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


def test_level_0_is_not_finalized_and_set_levels_are() -> None:
    assert features("4.1", 0, serves_consumer_groups=False).finalized == {"metadata.version": 27}
    found = features("4.1", 1, serves_consumer_groups=True)
    assert found.finalized == {"metadata.version": 27, "transaction.version": 1, "group.version": 1}
    assert found.supported["group.version"] == (0, 1)


def test_v3_omits_supported_minimum_0_and_v4_keeps_it() -> None:
    found = features("4.0", 0, serves_consumer_groups=False)
    assert supported_for(3, found) == {"metadata.version": (7, 25)}
    assert supported_for(4, found) == {"metadata.version": (7, 25), "kraft.version": (0, 1),
                                       "transaction.version": (0, TRANSACTION_VERSION_BUILT)}


@pytest.mark.parametrize(("profile", "level"), [("3.3", 7), ("3.x", 21), ("3.9", 21)])
def test_3_x_reports_metadata_version_only(profile: str, level: int) -> None:
    found = features(profile, 1, serves_consumer_groups=True)
    assert found.supported == {"metadata.version": (1, level)} and found.finalized == {"metadata.version": level}


@pytest.mark.parametrize("profile", ["2.8", "3.0", "3.2"])
def test_releases_before_kip_778_report_nothing(profile: str) -> None:
    found = features(profile, 1, serves_consumer_groups=True)
    assert (found.supported, found.finalized, found.epoch) == ({}, {}, -1)
