"""SASL/OAUTHBEARER (RFC 7628) with unsecured JWTs, as Kafka's OAuthBearerUnsecuredValidatorCallbackHandler
validates them: the header's `alg` is `none`, the principal is the `sub` claim (or the claim named by
the JAAS option `unsecuredValidatorPrincipalClaimName`), and a token whose `exp` has passed is refused.
A refused token is answered, as RFC 7628 asks, with a JSON error challenge; the client's `\\x01` reply
then fails the authentication."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

from minikafka.broker.security.sasl import AuthenticationFailed, Step

_SEPARATOR = "\x01"


def _decode_part(part: str) -> Any:
    try:
        return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))
    except ValueError:
        return None


class OAuthBearerServer:
    def __init__(self, now_ms: Callable[[], int], principal_claim: str = "sub") -> None:
        self._now_ms = now_ms
        self._principal_claim = principal_claim
        self._error: str | None = None

    def step(self, token: bytes) -> Step:
        if self._error is not None:
            # The client's acknowledgement of the error challenge (RFC 7628 3.2.3).
            raise AuthenticationFailed(f"Authentication failed: {self._error}")
        text = token.decode("utf-8", errors="replace")
        header, _sep, rest = text.partition(_SEPARATOR)
        if not header.startswith(("n,", "y,")):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message")
        fields = dict(item.split("=", 1) for item in rest.split(_SEPARATOR) if "=" in item)
        auth = fields.get("auth", "")
        if not auth.lower().startswith("bearer "):
            raise AuthenticationFailed("Invalid OAUTHBEARER client first message: no bearer token")
        problem, user = self._validate(auth[len("bearer "):].strip())
        if problem is not None:
            self._error = problem
            return Step(json.dumps({"status": "invalid_token"}).encode())
        return Step(b"", user)

    def _validate(self, jwt: str) -> tuple[str | None, str]:
        parts = jwt.split(".")
        if len(parts) != 3:
            return "the token is not a JWT of three parts", ""
        header, claims = _decode_part(parts[0]), _decode_part(parts[1])
        if not isinstance(header, dict) or not isinstance(claims, dict):
            return "the token's header or claims are not JSON objects", ""
        if header.get("alg") != "none":
            return "an unsecured token has alg none", ""
        principal = claims.get(self._principal_claim)
        if not isinstance(principal, str) or not principal:
            return f"the token has no {self._principal_claim} claim", ""
        expires = claims.get("exp")
        if not isinstance(expires, (int, float)):
            return "the token has no exp claim", ""
        if expires * 1000 <= self._now_ms():
            return "the token has expired", ""
        return None, principal
