"""minikafka for tests: `Broker` (in-process or subprocess) and a pytest plugin (minikafka.testing.plugin).

`Broker` is imported on first use: pytest loads the plugin in every run wherever minikafka is installed,
and a run that uses no minikafka fixture should not pay for importing the broker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from minikafka.testing.broker import Broker, BrokerError, Mode

__all__ = ["Broker", "BrokerError", "Mode"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from minikafka.testing import broker

        return getattr(broker, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
