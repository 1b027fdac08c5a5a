"""What a connection knows about its client's identity, shared by every request on it.

A connection starts as `User:ANONYMOUS` (Kafka's principal for PLAINTEXT, and for SSL without a client
certificate). TLS sets the principal from the client certificate's subject; SASL sets it once
SaslAuthenticate succeeds. Until then, on a SASL listener, only ApiVersions, SaslHandshake and
SaslAuthenticate are served (broker/wire/dispatch.py closes the connection on anything else, as Kafka does).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`User:alice`; the name may itself hold colons (an X.500 name does not, but be lenient)."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"invalid principal {text!r}: expected Type:name")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")


@dataclass(slots=True)
class Session:
    listener_name: str
    security_protocol: str
    client_host: str  # the peer's IP, as ACL host matching sees it
    principal: KafkaPrincipal = ANONYMOUS
    # Set by SaslHandshake; the mechanism's server state between SaslAuthenticate rounds.
    sasl_mechanism: str | None = None
    sasl_state: Any = field(default=None, repr=False)
    # True on a SASL listener until SaslAuthenticate succeeds. A field, not a property: dispatch reads it
    # for every request.
    awaiting_authentication: bool = False
    # What ApiVersions v3+ says the client is (KIP-511), for client metrics `match` patterns (KIP-714).
    client_software_name: str | None = None
    client_software_version: str | None = None

    def __post_init__(self) -> None:
        self.awaiting_authentication = self.requires_sasl

    @property
    def requires_sasl(self) -> bool:
        return self.security_protocol in (SASL_PLAINTEXT, SASL_SSL)


def plaintext_session(client_host: str) -> Session:
    return Session("PLAINTEXT", PLAINTEXT, client_host)
