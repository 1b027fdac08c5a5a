"""Shared fixtures: real minikafka broker processes on free 127.0.0.1 ports, started with minikafka.testing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from minikafka.testing import Broker

from tests.support.brokers import process_broker


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., Broker]]:
    """Start brokers with chosen overrides: `broker_factory(**{"num.partitions": "3"})`."""
    started: list[Broker] = []

    def make(**overrides: str) -> Broker:
        index = len(started)
        broker = process_broker(tmp_path / f"data{index}", tmp_path / f"logs{index}", overrides)
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        try:
            broker.stop()
        except Exception:
            broker.kill()
        finally:
            broker.close()


@pytest.fixture
def broker(broker_factory) -> Broker:
    return broker_factory()


@pytest.fixture
def group_broker(broker_factory) -> Broker:
    """A broker that accepts the short sessions group tests use to see members leave quickly."""
    return broker_factory(**{"group.min.session.timeout.ms": "1000"})
