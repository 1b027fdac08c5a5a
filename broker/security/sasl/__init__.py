"""SASL mechanisms as server-side state machines, one instance per authentication.

A mechanism gets each client token in turn (SaslAuthenticate's auth_bytes) and returns the next
challenge; when it is done it names the authenticated user. A failed authentication raises
`AuthenticationFailed` with the message Kafka's SaslServer gives, which the client sees in
SASL_AUTHENTICATION_FAILED before the broker closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class AuthenticationFailed(Exception):
    pass


@dataclass(frozen=True, slots=True)
class Step:
    challenge: bytes
    # The authenticated user's name once the exchange is complete; None while more tokens are due.
    user: str | None = None


class Mechanism(Protocol):
    def step(self, token: bytes) -> Step: ...
