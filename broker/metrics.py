"""Counters a future inspector or Prometheus endpoint shows; plain in-process counts for now."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass(slots=True)
class BrokerMetrics:
    # Requests (or partitions of one) answered UNKNOWN_SERVER_ERROR because a handler raised
    # something unexpected, keyed by API name as the logs show it (e.g. "PRODUCE").
    unexpected_errors: Counter[str] = field(default_factory=Counter)

    # Connections the broker closed because of what the client sent, keyed by why: "frame size" (a size
    # prefix outside (0, socket.request.max.bytes]), "invalid request" (bytes that do not decode) or
    # "unanswerable request" (unknown API or version, or no response that can be encoded).
    closed_for_bad_input: Counter[str] = field(default_factory=Counter)

    def count_unexpected(self, api: str) -> None:
        self.unexpected_errors[api] += 1

    def count_closed_for_bad_input(self, reason: str) -> None:
        self.closed_for_bad_input[reason] += 1
