"""minikafka for tests: a real Kafka-protocol broker your tests start in milliseconds.

    from minikafka.testing import Broker

    with Broker() as broker:                      # in this process, on a free port, in a temporary directory
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        ...
        broker.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", topic="orders")  # the next Produce fails

What it holds:
- `Broker(config=None, *, mode="inprocess"|"process", port=0, data_dir=None, log_file=None, timeout=30.0,
  nodes=1, admin_listener=True, serve_args=(), schema_registry=False, fork_server=None)`: start, stop,
  restart, kill; fault rules, the manual clock, crash points, several nodes, `state()`, `trace()`, `metrics()`,
  `reset()` back to the first-start state (see `help(Broker)`).
  Process mode forks its brokers from a fork server that has the broker imported (testing/forkserver.py);
  `fork_server=False` or MINIKAFKA_FORK_SERVER=0 spawns `minikafka serve` per start instead.
- `BrokerError`: a broker that did not start or answer. `ConfigError`: a configuration it refuses (a bad
  key or value). `FaultSpecError`: a fault rule it refuses. `Mode`: "inprocess" or "process".
- The pytest plugin (`minikafka.testing.plugin`, loaded wherever minikafka is installed): the fixtures
  `minikafka_session`, `minikafka`, `minikafka_bootstrap`, `minikafka_reset` (the session broker reset before
  the test: `Broker.reset()`), `unique_topic`, `unique_group` and the `minikafka` marker.
  `minikafka.testing.certs` makes test CAs and certificates for TLS listeners.

These names are imported on first use: pytest loads the plugin in every run wherever minikafka is
installed, and a run that uses no minikafka fixture should not pay for importing the broker.
Documentation: docs/testing.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.broker.config.config import ConfigError
    from minikafka.broker.control.faults import FaultSpecError
    from minikafka.testing.broker import Broker, BrokerError, Mode

__all__ = ["Broker", "BrokerError", "ConfigError", "FaultSpecError", "Mode"]

# Where each name lives; imported when first asked for.
_HOMES = {
    "Broker": "minikafka.testing.broker",
    "BrokerError": "minikafka.testing.broker",
    "Mode": "minikafka.testing.broker",
    "ConfigError": "minikafka.broker.config.config",
    "FaultSpecError": "minikafka.broker.control.faults",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    # help() and dir() list what `from minikafka.testing import ...` offers, not only the sub-modules.
    return sorted({*globals(), *__all__})
