"""The group coordinator's timers are the coordinators' shared `Timers` (also driving the
transaction coordinator's marker retries)."""

from minikafka.coordinator.timers import Timers

__all__ = ["Timers"]
