"""Brokers as `minikafka serve` runs them, started with the kit users get (minikafka.testing.Broker)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from minikafka.testing import Broker


def process_broker(data_dir: Path, log_dir: Path, overrides: Mapping[str, str] | None = None, *,
                   serve_args: Sequence[str] = ()) -> Broker:
    """A broker subprocess, not started yet: its data in `data_dir`, its JSON log in `log_dir`/broker.log, no
    admin listener unless configured (as `minikafka serve` runs by default)."""
    return Broker(overrides, mode="process", data_dir=data_dir, log_file=log_dir / "broker.log",
                  admin_listener=False, serve_args=serve_args)
