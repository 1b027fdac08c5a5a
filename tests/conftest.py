"""Shared fixtures: a real minikafka broker process on a free 127.0.0.1 port."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.broker_process import BrokerProcess


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator[Callable[..., BrokerProcess]]:
    """Start brokers with chosen overrides: `broker_factory(**{"num.partitions": "3"})`."""
    started: list[BrokerProcess] = []

    def make(**overrides: str) -> BrokerProcess:
        index = len(started)
        data_dir = tmp_path / f"data{index}"
        log_dir = tmp_path / f"logs{index}"
        log_dir.mkdir()
        broker = BrokerProcess(data_dir, log_dir, overrides)
        started.append(broker)
        return broker.start()

    yield make
    for broker in started:
        try:
            broker.stop()
        except Exception:
            broker.kill9()


@pytest.fixture
def broker(broker_factory) -> BrokerProcess:
    return broker_factory()


@pytest.fixture
def group_broker(broker_factory) -> BrokerProcess:
    """A broker that accepts the short sessions group tests use to see members leave quickly."""
    return broker_factory(**{"group.min.session.timeout.ms": "1000"})
