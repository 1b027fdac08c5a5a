"""The SASL mechanisms' server sides, against the RFCs' examples and Kafka's rules."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from minikafka.broker.security.sasl import AuthenticationFailed
from minikafka.broker.security.sasl.oauthbearer import OAuthBearerServer
from minikafka.broker.security.sasl.plain import PlainServer
from minikafka.broker.security.sasl.scram import ScramServer, credential_from_password
from minikafka.broker.security.sasl_server import SaslServer, ScramCredentials, jaas_options

# RFC 7677 section 3: user "user", password "pencil".
RFC7677_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC7677_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC7677_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC7677_SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
RFC7677_CLIENT_FINAL = (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
RFC7677_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def _rfc7677_server() -> ScramServer:
    credential = credential_from_password("SCRAM-SHA-256", "pencil", 4096, RFC7677_SALT)
    return ScramServer("SCRAM-SHA-256", {"user": credential}.get, server_nonce=lambda: RFC7677_SERVER_NONCE)


def test_scram_sha_256_follows_the_rfc_7677_example_exactly() -> None:
    server = _rfc7677_server()
    first = server.step(RFC7677_CLIENT_FIRST)
    assert first.challenge == RFC7677_SERVER_FIRST and first.user is None
    final = server.step(RFC7677_CLIENT_FINAL)
    assert final.challenge == RFC7677_SERVER_FINAL and final.user == "user"


@pytest.mark.parametrize(("client_first", "client_final", "message"), [
    (RFC7677_CLIENT_FIRST, RFC7677_CLIENT_FINAL.replace(b"p=dHzb", b"p=dHzc"), "Invalid user credentials"),
    (RFC7677_CLIENT_FIRST, RFC7677_CLIENT_FINAL.replace(b"$k0,", b"$k1,"), "Invalid client nonce"),
    (RFC7677_CLIENT_FIRST, RFC7677_CLIENT_FINAL.replace(b"c=biws", b"c=eSws"), "Invalid channel binding"),
    (b"n,,n=nobody,r=abc", None, "Invalid user credentials"),
    (b"n,a=admin,n=user,r=abc", None, "authorization id that is different"),
    (b"p=tls-unique,,n=user,r=abc", None, "Invalid SCRAM client first message"),
    (b"n,,n=user,r=abc,tokenauth=true", None, "delegation tokens"),
])
def test_scram_refusals_carry_kafkas_messages(client_first: bytes, client_final: bytes | None, message: str) -> None:
    server = _rfc7677_server()
    with pytest.raises(AuthenticationFailed, match=message):
        server.step(client_first)
        assert client_final is not None
        server.step(client_final)


def test_scram_accepts_the_nonce_old_librdkafka_sends() -> None:
    """librdkafka before 1.9 puts its own nonce in front of the combined one; Kafka checks endsWith."""
    server = _rfc7677_server()
    server.step(RFC7677_CLIENT_FIRST)
    doubled = RFC7677_CLIENT_FINAL.replace(b"r=", b"r=rOprNGfwEbeRWgbNEkqO", 1)
    with pytest.raises(AuthenticationFailed, match="Invalid user credentials"):
        server.step(doubled)  # the proof covers the message as sent, so only the nonce check is lenient


@pytest.mark.parametrize(("token", "message"), [
    (b"\x00alice\x00wrong", "Invalid username or password"),
    (b"\x00mallory\x00alice-secret", "Invalid username or password"),
    (b"\x00\x00alice-secret", "username not specified"),
    (b"\x00alice\x00", "password not specified"),
    (b"bob\x00alice\x00alice-secret", "authorization id that is different"),
    (b"alice-secret", "expected 3 tokens"),
])
def test_plain_refusals(token: bytes, message: str) -> None:
    with pytest.raises(AuthenticationFailed, match=message):
        PlainServer({"alice": "alice-secret"}).step(token)


def test_plain_accepts_an_authorization_id_equal_to_the_user() -> None:
    assert PlainServer({"alice": "alice-secret"}).step(b"alice\x00alice\x00alice-secret").user == "alice"


def _jwt(claims: dict[str, object], alg: str = "none") -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': alg})}.{part(claims)}."


def _oauth_token(jwt: str) -> bytes:
    return f"n,,\x01auth=Bearer {jwt}\x01\x01".encode()


def test_oauthbearer_accepts_an_unexpired_unsecured_token() -> None:
    step = OAuthBearerServer(lambda: 1_000_000).step(_oauth_token(_jwt({"sub": "alice", "exp": 2000})))
    assert step.user == "alice" and step.challenge == b""


@pytest.mark.parametrize("jwt", [
    _jwt({"sub": "alice", "exp": 999}), _jwt({"sub": "alice", "exp": 2000}, alg="HS256"), _jwt({"exp": 2000}),
    "not-a-jwt"])
def test_oauthbearer_answers_a_bad_token_with_an_error_challenge_then_fails(jwt: str) -> None:
    server = OAuthBearerServer(lambda: 1_000_000)
    step = server.step(_oauth_token(jwt))
    assert step.user is None and json.loads(step.challenge) == {"status": "invalid_token"}
    with pytest.raises(AuthenticationFailed):
        server.step(b"\x01")


def test_jaas_users_and_enabled_mechanisms(tmp_path: Path) -> None:
    line = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
    assert jaas_options(line)["user_alice"] == "alice-secret"
    sasl = SaslServer.from_config({"listener.name.sasl_ssl.plain.sasl.jaas.config": line,
                                   "sasl.enabled.mechanisms": "GSSAPI,PLAIN",
                                   "minikafka.scram.users": "carol:carol-secret"}, tmp_path, lambda: 0)
    assert sasl.enabled_mechanisms("SASL_SSL") == ["PLAIN"]
    assert sasl.start("SASL_SSL", "PLAIN").step(b"\x00alice\x00alice-secret").user == "alice"
    reloaded = ScramCredentials.load(tmp_path)
    assert reloaded.get("carol", "SCRAM-SHA-512") == sasl.credentials.get("carol", "SCRAM-SHA-512") is not None
    assert "carol-secret" not in (tmp_path / "scram-credentials.json").read_text()
