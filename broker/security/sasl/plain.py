"""SASL/PLAIN (RFC 4616), as Kafka's PlainSaslServer checks it: one message, authzid NUL user NUL password."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from minikafka.broker.security.sasl import AuthenticationFailed, Step


class PlainServer:
    def __init__(self, passwords: Mapping[str, str]) -> None:
        self._passwords = passwords
        self._done = False

    def step(self, token: bytes) -> Step:
        if self._done:
            raise AuthenticationFailed("Authentication failed: PLAIN takes one message")
        self._done = True
        parts = token.decode("utf-8", errors="replace").split("\x00")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens, got " + str(len(parts)))
        authorization_id, user, password = parts
        if not user:
            raise AuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise AuthenticationFailed("Authentication failed: password not specified")
        if authorization_id and authorization_id != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        expected = self._passwords.get(user)
        # compare_digest: the time taken does not tell how much of a guessed password was right
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        return Step(b"", user)
