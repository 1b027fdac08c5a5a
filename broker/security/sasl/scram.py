"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), as Kafka's ScramSaslServer runs them.

Two rounds: client-first -> server-first (nonce, salt, iterations), client-final (proof) ->
server-final (the server's signature). Only the stored key and server key of a user are kept
(`ScramCredential`), never the password. Channel binding is not supported (gs2 flag `n` or `y`);
the `tokenauth` extension (delegation tokens) is refused: this broker issues no tokens.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from collections.abc import Callable
from dataclasses import dataclass

from minikafka.broker.security.sasl import AuthenticationFailed, Step

MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# Kafka's ScramMechanism: the wire codes of AlterUserScramCredentials and DescribeUserScramCredentials.
MECHANISM_CODES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384

_CLIENT_FIRST = re.compile(r"^(?P<gs2>[ny],(?:a=(?P<authzid>[^,]*))?,)(?P<bare>n=(?P<user>[^,]*),r=(?P<nonce>[^,]+)"
                           r"(?P<extensions>(?:,[A-Za-z]+=[^,]*)*))$")
_CLIENT_FINAL = re.compile(r"^(?P<without_proof>c=(?P<binding>[^,]*),r=(?P<nonce>[^,]*)(?:,[A-Za-z]+=[^,]*)*)"
                           r",p=(?P<proof>[^,]+)$")


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def _hmac(algorithm: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, algorithm).digest()


def credential_from_salted_password(algorithm: str, salt: bytes, salted_password: bytes,
                                    iterations: int) -> ScramCredential:
    client_key = _hmac(algorithm, salted_password, b"Client Key")
    return ScramCredential(salt, hashlib.new(algorithm, client_key).digest(),
                           _hmac(algorithm, salted_password, b"Server Key"), iterations)


def credential_from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                             salt: bytes | None = None) -> ScramCredential:
    algorithm = MECHANISMS[mechanism]
    salt = os.urandom(32) if salt is None else salt
    salted = hashlib.pbkdf2_hmac(algorithm, password.encode(), salt, iterations)
    return credential_from_salted_password(algorithm, salt, salted, iterations)


def _sasl_name(text: str) -> str:
    """RFC 5802 saslname: `=2C` is a comma and `=3D` an equals sign; any other `=` is malformed."""
    if re.search(r"=(?!2C|3D)", text):
        raise AuthenticationFailed(f"Invalid SCRAM client first message: bad user name {text!r}")
    return text.replace("=2C", ",").replace("=3D", "=")


class ScramServer:
    def __init__(self, mechanism: str, credential_of: Callable[[str], ScramCredential | None],
                 server_nonce: Callable[[], str] = lambda: os.urandom(16).hex()) -> None:
        """`server_nonce`: alphanumeric by default, as Kafka's ScramFormatter makes it."""
        self._algorithm = MECHANISMS[mechanism]
        self._server_nonce = server_nonce
        self._credential_of = credential_of
        self._round = 0
        self._user = ""
        self._credential: ScramCredential | None = None
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    def step(self, token: bytes) -> Step:
        self._round += 1
        text = token.decode("utf-8", errors="replace")
        if self._round == 1:
            return Step(self._first(text).encode())
        if self._round == 2:
            return self._final(text)
        raise AuthenticationFailed("Authentication failed: SCRAM exchange is already complete")

    def _first(self, text: str) -> str:
        match = _CLIENT_FIRST.match(text)
        if match is None:
            raise AuthenticationFailed(f"Invalid SCRAM client first message format: {text!r}")
        extensions = dict(item.split("=", 1) for item in match["extensions"].split(",") if item)
        if extensions.get("tokenauth", "false").lower() == "true":
            raise AuthenticationFailed("Authentication failed: delegation tokens are not supported")
        user = _sasl_name(match["user"])
        credential = self._credential_of(user)
        if credential is None:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        authorization_id = match["authzid"]
        if authorization_id and _sasl_name(authorization_id) != user:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self._user, self._credential = user, credential
        self._gs2_header = match["gs2"]
        self._nonce = match["nonce"] + self._server_nonce()
        self._client_first_bare = match["bare"]
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        return self._server_first

    def _final(self, text: str) -> Step:
        match = _CLIENT_FINAL.match(text)
        if match is None:
            raise AuthenticationFailed(f"Invalid SCRAM client final message format: {text!r}")
        # Kafka's check is endsWith, not equality: librdkafka before 1.9 (Debian's kcat) repeats its own
        # nonce in front of the combined one.
        if not match["nonce"].endswith(self._nonce):
            raise AuthenticationFailed("Invalid client nonce in the final client message.")
        if match["binding"] != base64.b64encode(self._gs2_header.encode()).decode():
            raise AuthenticationFailed("Invalid channel binding in the final client message.")
        assert self._credential is not None
        auth_message = f"{self._client_first_bare},{self._server_first},{match['without_proof']}".encode()
        try:
            proof = base64.b64decode(match["proof"], validate=True)
        except ValueError:
            raise AuthenticationFailed("Invalid client credentials") from None
        signature = _hmac(self._algorithm, self._credential.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthenticationFailed("Invalid client credentials")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self._algorithm, client_key).digest(), self._credential.stored_key):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        server_signature = _hmac(self._algorithm, self._credential.server_key, auth_message)
        return Step(b"v=" + base64.b64encode(server_signature), self._user)
