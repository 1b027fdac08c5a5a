"""The broker's SASL side: which mechanisms each listener offers, who the users are, SCRAM credentials.

Configured with Kafka's keys:
- `sasl.enabled.mechanisms` (and `listener.name.<listener>.sasl.enabled.mechanisms`): PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Kafka's default is GSSAPI, which needs Kerberos: unset,
  minikafka offers PLAIN and both SCRAMs; GSSAPI in the list is logged and left out.
- PLAIN users from the JAAS line `listener.name.<listener>.plain.sasl.jaas.config=...PlainLoginModule
  required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";`
  (or an unprefixed `sasl.jaas.config`), `user_<name>="<password>"` as in Kafka.
- SCRAM credentials, as Kafka keeps them in its metadata: set with AlterUserScramCredentials (or
  `minikafka.scram.users=alice:alice-secret,...`, minikafka's stand-in for `kafka-storage format
  --add-scram`), kept in `scram-credentials.json` in the data directory, rewritten atomically on every
  change; salt, iterations, stored key and server key only.
- OAUTHBEARER: unsecured JWTs (`alg: none`), the principal from `sub` or the JAAS option
  `unsecuredValidatorPrincipalClaimName` of `listener.name.<listener>.oauthbearer.sasl.jaas.config`.
"""

from __future__ import annotations

import base64
import hmac
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import structlog
from minikafka.broker.config.config import ConfigError
from minikafka.broker.security.sasl import Mechanism
from minikafka.broker.security.sasl.oauthbearer import OAuthBearerServer
from minikafka.broker.security.sasl.plain import PlainServer
from minikafka.broker.security.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from minikafka.broker.security.sasl.scram import ScramCredential, ScramServer, credential_from_password
from minikafka.storage.checkpoint import write_atomically

_log = structlog.get_logger("minikafka.sasl")

SUPPORTED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
DEFAULT_ENABLED = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
CREDENTIALS_FILE = "scram-credentials.json"
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


def jaas_options(text: str) -> dict[str, str]:
    """The `key="value"` options of a JAAS login module line (the module name and flag are skipped)."""
    return {match[1]: match[2] if match[2] is not None else match[3] for match in _JAAS_OPTION.finditer(text)}


def _listener_setting(properties: Mapping[str, str], listener_name: str, key: str) -> str | None:
    return properties.get(f"listener.name.{listener_name.lower()}.{key}", properties.get(key))


class ScramCredentials:
    """user -> mechanism -> credential, persisted in the data directory."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._users: dict[str, dict[str, ScramCredential]] = {}

    @classmethod
    def load(cls, data_dir: Path) -> ScramCredentials:
        store = cls(data_dir / CREDENTIALS_FILE)
        if store._path.exists():
            raw = json.loads(store._path.read_text())
            for user, mechanisms in raw.get("users", {}).items():
                store._users[user] = {
                    mechanism: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                               base64.b64decode(c["server_key"]), int(c["iterations"]))
                    for mechanism, c in mechanisms.items()}
        return store

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        return {user: dict(mechanisms) for user, mechanisms in self._users.items()}

    def apply(self, upserts: list[tuple[str, str, ScramCredential]], deletions: list[tuple[str, str]]) -> None:
        """Change several credentials at once, then write the file once."""
        for user, mechanism in deletions:
            mechanisms = self._users.get(user, {})
            mechanisms.pop(mechanism, None)
            if not mechanisms:
                self._users.pop(user, None)
        for user, mechanism, credential in upserts:
            self._users.setdefault(user, {})[mechanism] = credential
        self._save()

    def reset(self) -> None:
        """Forget every credential and the file."""
        self._users.clear()
        self._path.unlink(missing_ok=True)

    def _save(self) -> None:
        def encoded(credential: ScramCredential) -> dict[str, object]:
            return {"salt": base64.b64encode(credential.salt).decode(),
                    "stored_key": base64.b64encode(credential.stored_key).decode(),
                    "server_key": base64.b64encode(credential.server_key).decode(),
                    "iterations": credential.iterations}

        document = {"users": {user: {mechanism: encoded(c) for mechanism, c in mechanisms.items()}
                              for user, mechanisms in sorted(self._users.items())}}
        write_atomically(self._path, (json.dumps(document, indent=1) + "\n").encode())


class SaslServer:
    def __init__(self, properties: Mapping[str, str], credentials: ScramCredentials,
                 now_ms: Callable[[], int]) -> None:
        self._properties = properties
        self.credentials = credentials
        self._now_ms = now_ms

    @classmethod
    def from_config(cls, properties: Mapping[str, str], data_dir: Path, now_ms: Callable[[], int]) -> SaslServer:
        credentials = ScramCredentials.load(data_dir)
        _seed(credentials, properties)
        return cls(properties, credentials, now_ms)

    def reset(self) -> None:
        """A broker reset: the SCRAM credentials AlterUserScramCredentials made are gone, those
        minikafka.scram.users seeds are back. Connections already authenticated stay so, as Kafka keeps a
        connection whose user's credentials are deleted until it authenticates again."""
        self.credentials.reset()
        _seed(self.credentials, self._properties)

    def enabled_mechanisms(self, listener_name: str) -> list[str]:
        value = _listener_setting(self._properties, listener_name, "sasl.enabled.mechanisms")
        if value is None:
            return list(DEFAULT_ENABLED)
        enabled = []
        for name in (item.strip().upper() for item in value.split(",") if item.strip()):
            if name in SUPPORTED:
                enabled.append(name)
            else:
                _log.warning("SASL mechanism not supported; left out", mechanism=name, listener=listener_name)
        return enabled

    def start(self, listener_name: str, mechanism: str) -> Mechanism:
        if mechanism == "PLAIN":
            return PlainServer(self._jaas_users(listener_name, "plain"))
        if mechanism in SCRAM_MECHANISMS:
            return ScramServer(mechanism, lambda user: self.credentials.get(user, mechanism))
        if mechanism == "OAUTHBEARER":
            options = jaas_options(self._jaas(listener_name, "oauthbearer") or "")
            return OAuthBearerServer(self._now_ms, options.get("unsecuredValidatorPrincipalClaimName", "sub"))
        raise ValueError(f"no SASL mechanism {mechanism}")

    def verify_password(self, listener_name: str, user: str, password: str) -> bool:
        """A user name and password checked as a login on this listener would check them: against its PLAIN
        users, then its SCRAM credentials (for HTTP basic auth in front of the schema registry)."""
        enabled = self.enabled_mechanisms(listener_name)
        if "PLAIN" in enabled:
            known = self._jaas_users(listener_name, "plain").get(user)
            if known is not None and hmac.compare_digest(known.encode(), password.encode()):
                return True
        for mechanism in SCRAM_MECHANISMS:
            credential = self.credentials.get(user, mechanism) if mechanism in enabled else None
            if credential is not None:
                presented = credential_from_password(mechanism, password, credential.iterations, credential.salt)
                if hmac.compare_digest(presented.stored_key, credential.stored_key):
                    return True
        return False

    def _jaas(self, listener_name: str, mechanism: str) -> str | None:
        return (self._properties.get(f"listener.name.{listener_name.lower()}.{mechanism}.sasl.jaas.config")
                or self._properties.get("sasl.jaas.config"))

    def _jaas_users(self, listener_name: str, mechanism: str) -> dict[str, str]:
        options = jaas_options(self._jaas(listener_name, mechanism) or "")
        return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


def _seed(credentials: ScramCredentials, properties: Mapping[str, str]) -> None:
    """The users `minikafka.scram.users` names, for every SCRAM mechanism, where not set already."""
    seeded = [(user, mechanism, credential_from_password(mechanism, password))
              for user, password in _seed_users(properties.get("minikafka.scram.users", ""))
              for mechanism in SCRAM_MECHANISMS if credentials.get(user, mechanism) is None]
    if seeded:
        credentials.apply(seeded, [])


def _seed_users(value: str) -> list[tuple[str, str]]:
    users = []
    for item in filter(None, (part.strip() for part in value.split(","))):
        user, sep, password = item.partition(":")
        if not sep or not user:
            raise ConfigError(f"invalid minikafka.scram.users entry {item!r}: expected user:password")
        users.append((user, password))
    return users
