"""TLS listener contexts from Kafka's ssl.* keys, checked with real handshakes over loopback sockets, and
client principals as Kafka's DefaultKafkaPrincipalBuilder and SslPrincipalMapper make them."""

from __future__ import annotations

import asyncio
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID
from minikafka.broker.config.config import BROKER_CONFIGS, ConfigError, build_config, parse_properties
from minikafka.broker.config.dynamic_config import BROKER_KEYS, config_entry
from minikafka.broker.security.session import ANONYMOUS, KafkaPrincipal
from minikafka.broker.security.tls import (
    PrincipalMapper,
    PrincipalMappingError,
    principal_builder,
    principal_for_peer,
    principal_mapper,
    rfc2253_name,
    rfc2253_subject,
    server_context,
)
from minikafka.testing.certs import ClientCertificate, TestCertificates, generate_certificates

ALICE_SUBJECT = "CN=alice,OU=eng,O=acme"


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> TestCertificates:
    return generate_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def alice(certs: TestCertificates) -> ClientCertificate:
    return certs.client("alice", ALICE_SUBJECT)


def ssl_properties(certs: TestCertificates, **extra: str) -> dict[str, str]:
    return {"ssl.keystore.location": str(certs.server_keystore), "ssl.truststore.location": str(certs.ca_cert),
            **{key.replace("_", "."): value for key, value in extra.items()}}


def client_context(certs: TestCertificates, client: ClientCertificate | None = None, *,
                   maximum: ssl.TLSVersion | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs.ca_cert))
    if client is not None:
        context.load_cert_chain(client.cert, client.key)
    if maximum is not None:
        context.maximum_version = maximum
    return context


@dataclass
class Handshake:
    principal: KafkaPrincipal | None  # None: the server never got a connection (handshake failed)
    version: str | None
    cipher: str | None
    client_error: BaseException | None


async def handshake(properties: Mapping[str, str], client: ssl.SSLContext, *, listener: str = "SSL",
                    server_hostname: str = "127.0.0.1") -> Handshake:
    """One TLS connection to a server using server_context(properties): what each side saw."""
    context = server_context(properties, listener)
    mapper = principal_mapper(properties, listener)
    accepted: asyncio.Future[KafkaPrincipal] = asyncio.get_running_loop().create_future()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(principal_for_peer(writer.get_extra_info("ssl_object"), mapper))
        writer.write(b"ok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    version = cipher = None
    client_error: BaseException | None = None
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection("127.0.0.1", port, ssl=client, server_hostname=server_hostname), 10)
        ssl_object = writer.get_extra_info("ssl_object")
        version, cipher = ssl_object.version(), ssl_object.cipher()[0]
        try:
            # TLS 1.3: the server checks the client's certificate after the client's side is done, so a
            # refusal shows on the first read.
            if await asyncio.wait_for(reader.read(2), 10) != b"ok":
                client_error = ConnectionError("closed by the server")
        except (OSError, ssl.SSLError) as exc:
            client_error = exc
        writer.close()
    except (OSError, ssl.SSLError) as exc:
        client_error = exc
    try:
        principal = await asyncio.wait_for(asyncio.shield(accepted), 2) if client_error is None else None
    finally:
        server.close()
        await server.wait_closed()
    return Handshake(principal, version, cipher, client_error)


# --- contexts and handshakes -------------------------------------------------------------------------


async def test_pem_keystore_without_client_auth(certs: TestCertificates) -> None:
    for hostname in ("127.0.0.1", "localhost"):
        result = await handshake(ssl_properties(certs), client_context(certs), server_hostname=hostname)
        assert result.client_error is None
        assert result.principal == ANONYMOUS
        assert result.version == "TLSv1.3"


async def test_client_certificate_required_gives_its_distinguished_name(certs: TestCertificates,
                                                                     alice: ClientCertificate) -> None:
    result = await handshake(ssl_properties(certs, ssl_client_auth="required"), client_context(certs, alice))
    assert result.client_error is None
    assert result.principal == KafkaPrincipal("User", "CN=alice,OU=eng,O=acme")


async def test_required_client_certificate_missing_fails_the_handshake(certs: TestCertificates) -> None:
    result = await handshake(ssl_properties(certs, ssl_client_auth="required"), client_context(certs))
    assert result.client_error is not None
    assert result.principal is None


async def test_client_certificate_from_another_ca_is_refused(certs: TestCertificates, tmp_path: Path) -> None:
    stranger = generate_certificates(tmp_path).client("mallory")
    result = await handshake(ssl_properties(certs, ssl_client_auth="required"), client_context(certs, stranger))
    assert result.client_error is not None
    assert result.principal is None


async def test_requested_client_certificate_is_optional(certs: TestCertificates, alice: ClientCertificate) -> None:
    properties = ssl_properties(certs, ssl_client_auth="requested")
    assert (await handshake(properties, client_context(certs))).principal == ANONYMOUS
    with_certificate = await handshake(properties, client_context(certs, alice))
    assert with_certificate.principal == KafkaPrincipal("User", ALICE_SUBJECT)


async def test_client_auth_none_ignores_a_client_certificate(certs: TestCertificates,
                                                            alice: ClientCertificate) -> None:
    result = await handshake(ssl_properties(certs), client_context(certs, alice))
    assert result.principal == ANONYMOUS


async def test_listener_prefix_overrides_the_plain_key(certs: TestCertificates, alice: ClientCertificate) -> None:
    properties = {**ssl_properties(certs, ssl_client_auth="none"),
                  "listener.name.secure.ssl.client.auth": "required"}
    assert (await handshake(properties, client_context(certs), listener="SECURE")).client_error is not None
    assert (await handshake(properties, client_context(certs, alice), listener="SECURE")).principal == \
        KafkaPrincipal("User", ALICE_SUBJECT)
    # Another listener keeps the plain key's value.
    assert (await handshake(properties, client_context(certs), listener="SSL")).principal == ANONYMOUS


async def test_sasl_ssl_listener_takes_only_its_own_client_auth(certs: TestCertificates,
                                                                alice: ClientCertificate) -> None:
    """Kafka (KIP-684): the plain ssl.client.auth applies to SSL listeners; a SASL_SSL listener asks for
    client certificates only when its listener-prefixed key says so."""
    properties = ssl_properties(certs, ssl_client_auth="required")
    assert (await handshake(properties, client_context(certs), listener="SASL_SSL")).principal == ANONYMOUS
    properties["listener.name.sasl_ssl.ssl.client.auth"] = "required"
    assert (await handshake(properties, client_context(certs), listener="SASL_SSL")).client_error is not None
    # A custom listener name mapped to SASL_SSL is a SASL_SSL listener.
    custom = {**ssl_properties(certs, ssl_client_auth="required"),
              "listener.security.protocol.map": "EXTERNAL:SASL_SSL,PLAINTEXT:PLAINTEXT"}
    assert (await handshake(custom, client_context(certs), listener="EXTERNAL")).principal == ANONYMOUS


async def test_generated_broker_properties_work(certs: TestCertificates, alice: ClientCertificate) -> None:
    properties = certs.broker_properties("SSL", client_auth="required", encrypted_key=True)
    result = await handshake(properties, client_context(certs, alice))
    assert result.principal == KafkaPrincipal("User", ALICE_SUBJECT)


async def test_inline_pem_key_and_chain_from_a_properties_file(certs: TestCertificates) -> None:
    """Kafka's ssl.keystore.key / ssl.keystore.certificate.chain / ssl.truststore.certificates, written in
    a properties file with `\\` continuations (which remove the line breaks)."""
    def continued(key: str, pem: str) -> str:
        return f"{key}=" + " \\\n    ".join(pem.strip().splitlines()) + "\n"

    text = (continued("ssl.keystore.key", certs.server_key.read_text())
            + continued("ssl.keystore.certificate.chain", certs.server_cert.read_text())
            + continued("ssl.truststore.certificates", certs.ca_cert.read_text()))
    properties = parse_properties(text)
    assert "\n" not in properties["ssl.keystore.key"]
    result = await handshake(properties, client_context(certs))
    assert result.client_error is None
    assert result.principal == ANONYMOUS


async def test_inline_encrypted_key(certs: TestCertificates) -> None:
    text = certs.server_keystore_encrypted.read_text()
    key = text[: text.index("-----BEGIN CERTIFICATE-----")]
    properties = {"ssl.keystore.key": key, "ssl.keystore.certificate.chain": certs.server_cert.read_text(),
                  "ssl.key.password": certs.key_password}
    assert (await handshake(properties, client_context(certs))).client_error is None
    with pytest.raises(ConfigError, match=re.escape("the private key in ssl.keystore.key is encrypted: set "
                                                    "ssl.key.password")):
        server_context({**properties, "ssl.key.password": ""}, "SSL")


async def test_encrypted_key_with_its_password(certs: TestCertificates) -> None:
    properties = {"ssl.keystore.location": str(certs.server_keystore_encrypted),
                  "ssl.key.password": certs.key_password}
    assert (await handshake(properties, client_context(certs))).client_error is None


async def test_pkcs12_keystore_and_truststore(certs: TestCertificates, alice: ClientCertificate,
                                              tmp_path: Path) -> None:
    key = serialization.load_pem_private_key(certs.server_key.read_bytes(), password=None)
    chain = x509.load_pem_x509_certificates(certs.server_cert.read_bytes())
    assert isinstance(key, ec.EllipticCurvePrivateKey)
    keystore = tmp_path / "server.p12"
    keystore.write_bytes(pkcs12.serialize_key_and_certificates(
        b"server", key, chain[0], chain[1:], serialization.BestAvailableEncryption(b"store-secret")))
    truststore = tmp_path / "trust.p12"
    truststore.write_bytes(pkcs12.serialize_key_and_certificates(
        None, None, None, [x509.load_pem_x509_certificate(certs.ca_cert.read_bytes())],
        serialization.BestAvailableEncryption(b"trust-secret")))
    properties = {"ssl.keystore.type": "PKCS12", "ssl.keystore.location": str(keystore),
                  "ssl.keystore.password": "store-secret", "ssl.truststore.type": "PKCS12",
                  "ssl.truststore.location": str(truststore), "ssl.truststore.password": "trust-secret",
                  "ssl.client.auth": "required"}
    result = await handshake(properties, client_context(certs, alice))
    assert result.principal == KafkaPrincipal("User", ALICE_SUBJECT)
    with pytest.raises(ConfigError, match=re.escape("ssl.keystore.password")):
        server_context({**properties, "ssl.keystore.password": "wrong"}, "SSL")


async def test_enabled_protocols_tls13_only_refuses_a_tls12_client(certs: TestCertificates) -> None:
    properties = ssl_properties(certs, ssl_enabled_protocols="TLSv1.3")
    assert (await handshake(properties, client_context(certs, maximum=ssl.TLSVersion.TLSv1_2))).client_error \
        is not None
    properties = ssl_properties(certs, ssl_enabled_protocols="TLSv1.2,TLSv1.3")
    result = await handshake(properties, client_context(certs, maximum=ssl.TLSVersion.TLSv1_2))
    assert result.client_error is None
    assert result.version == "TLSv1.2"


async def test_cipher_suites_with_kafka_names(certs: TestCertificates) -> None:
    properties = ssl_properties(certs, ssl_cipher_suites="TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")
    result = await handshake(properties, client_context(certs, maximum=ssl.TLSVersion.TLSv1_2))
    assert result.cipher == "ECDHE-ECDSA-AES256-GCM-SHA384"
    # Only TLS 1.3 suites listed: TLS 1.2 is off.
    properties = ssl_properties(certs, ssl_cipher_suites="TLS_AES_128_GCM_SHA256")
    assert (await handshake(properties, client_context(certs, maximum=ssl.TLSVersion.TLSv1_2))).client_error \
        is not None


# --- configuration errors name the key ---------------------------------------------------------------


@pytest.mark.parametrize(("extra", "message"), [
    ({"ssl.keystore.type": "JKS"}, r"ssl.keystore.type=JKS is not supported: .*keytool"),
    ({"ssl.keystore.type": "BKS"}, r"ssl.keystore.type: PEM or PKCS12"),
    ({"ssl.truststore.type": "JKS"}, r"ssl.truststore.type=JKS is not supported"),
    ({"ssl.client.auth": "always"}, r"'always' for configuration ssl.client.auth: one of none, requested, required"),
    ({"ssl.enabled.protocols": "TLSv1.4"}, r"ssl.enabled.protocols"),
    ({"ssl.enabled.protocols": ""}, r"ssl.enabled.protocols"),
    ({"ssl.cipher.suites": "TLS_NOT_A_SUITE"}, r"ssl.cipher.suites"),
    ({"ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_BOGUS"}, r"unknown cipher suites TLS_BOGUS"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=(.*?)$/$1/X"}, r"ssl.principal.mapping.rules"),
    ({"ssl.principal.mapping.rules": "RULE:^CN=((.*$/$1/"}, r"ssl.principal.mapping.rules"),
    ({"ssl.keystore.password": "secret"}, r"ssl.keystore.password cannot be set with a PEM key store"),
    ({"ssl.truststore.password": "secret"}, r"ssl.truststore.password cannot be set with a PEM trust store"),
    ({"ssl.keystore.location": "/nonexistent/keystore.pem"}, r"cannot read /nonexistent/keystore.pem "
                                                             r"\(ssl.keystore.location\)"),
    ({"ssl.truststore.location": "/nonexistent/ca.pem"}, r"\(ssl.truststore.location\)"),
    ({"ssl.keystore.key": "-----BEGIN PRIVATE KEY-----abc-----END PRIVATE KEY-----"},
     r"ssl.keystore.certificate.chain must be set with ssl.keystore.key"),
    ({"listener.name.ssl.ssl.client.auth": "maybe"}, r"listener.name.ssl.ssl.client.auth"),
])
def test_config_errors_name_the_key(certs: TestCertificates, extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        server_context({**ssl_properties(certs), **extra}, "SSL")


def test_missing_keystore_says_what_to_set() -> None:
    with pytest.raises(ConfigError, match=re.escape(
            "listener SSL needs a private key and certificate: set ssl.keystore.location")):
        server_context({}, "SSL")


def test_keystore_without_a_key(certs: TestCertificates) -> None:
    with pytest.raises(ConfigError, match="must hold a PEM private key and its certificate chain"):
        server_context({"ssl.keystore.location": str(certs.server_cert)}, "SSL")


def test_encrypted_key_password_missing_or_wrong(certs: TestCertificates) -> None:
    properties = {"ssl.keystore.location": str(certs.server_keystore_encrypted)}
    with pytest.raises(ConfigError, match=re.escape(
            "the private key in ssl.keystore.location is encrypted: set ssl.key.password")):
        server_context(properties, "SSL")
    with pytest.raises(ConfigError, match=re.escape(
            "cannot decrypt the private key in ssl.keystore.location with ssl.key.password")):
        server_context({**properties, "ssl.key.password": "wrong"}, "SSL")


def test_key_that_does_not_match_the_certificate(certs: TestCertificates, alice: ClientCertificate,
                                                 tmp_path: Path) -> None:
    mismatched = tmp_path / "mismatched.pem"
    mismatched.write_text(alice.key.read_text() + certs.server_cert.read_text())
    with pytest.raises(ConfigError, match=re.escape("invalid key store in ssl.keystore.location")):
        server_context({"ssl.keystore.location": str(mismatched)}, "SSL")


# --- broker config registration -----------------------------------------------------------------------


def test_ssl_keys_are_known_and_passwords_are_sensitive(tmp_path: Path) -> None:
    config = build_config(environ={}, data_dir=tmp_path, overrides=[
        "ssl.keystore.location=/k.pem", "ssl.key.password=secret", "ssl.client.auth=required",
        "listener.name.ssl.ssl.truststore.location=/ca.pem", "listener.name.ssl.no.such.key=1", "ssl.bogus=1"])
    assert config.unknown_keys == ("listener.name.ssl.no.such.key", "ssl.bogus")
    for key in ("ssl.key.password", "ssl.keystore.password", "ssl.keystore.key", "ssl.keystore.certificate.chain",
                "ssl.truststore.password", "ssl.truststore.certificates"):
        assert BROKER_CONFIGS[key].type == "password"
        synonyms = [{"name": key, "value": "secret", "source": 4}]
        entry = config_entry(key, "secret", 4, BROKER_KEYS[key].type, BROKER_KEYS[key].doc, synonyms,
                             read_only=True)
        # Kafka answers a password's value, and its synonyms' values, with null.
        assert (entry["is_sensitive"], entry["value"], entry["synonyms"][0]["value"]) == (True, None, None)
    assert BROKER_CONFIGS["ssl.keystore.location"].type == "string"
    entry = config_entry("ssl.keystore.location", "/k.pem", 4, "string", None, [], read_only=True)
    assert (entry["is_sensitive"], entry["value"]) == (False, "/k.pem")


# --- principals -------------------------------------------------------------------------------------


def test_principal_without_a_certificate_is_anonymous() -> None:
    assert principal_for_peer(None, PrincipalMapper.parse("DEFAULT")) == ANONYMOUS


def test_principal_mapping_rule_applies_to_the_distinguished_name(certs: TestCertificates,
                                                                  alice: ClientCertificate) -> None:
    async def run() -> Handshake:
        properties = ssl_properties(certs, ssl_client_auth="required",
                                    ssl_principal_mapping_rules="RULE:^CN=(.*?),OU=(.*?),.*$/$1@$2/U,DEFAULT")
        return await handshake(properties, client_context(certs, alice))

    assert asyncio.run(run()).principal == KafkaPrincipal("User", "ALICE@ENG")


def test_principal_builder_raises_a_connection_error_when_no_rule_applies(certs: TestCertificates,
                                                                          alice: ClientCertificate) -> None:
    build = principal_builder({"ssl.principal.mapping.rules": "RULE:^CN=bob$/bob/"}, "SSL")
    assert build(None) == ANONYMOUS
    der = x509.load_pem_x509_certificate(alice.cert.read_bytes()).public_bytes(serialization.Encoding.DER)

    class PeerWithCertificate:
        def getpeercert(self, binary_form: bool = False) -> bytes:
            return der

    with pytest.raises(PrincipalMappingError, match="CN=alice,OU=eng,O=acme") as caught:
        build(PeerWithCertificate())  # type: ignore[arg-type]
    assert isinstance(caught.value, OSError)


# Kafka's SslPrincipalMapperTest, case for case.
@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules: str) -> None:
    PrincipalMapper.parse(rules)


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ConfigError, match=re.escape("ssl.principal.mapping.rules")):
        PrincipalMapper.parse(rules)


def test_ssl_principal_mapper() -> None:
    mapper = PrincipalMapper.parse(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name_for("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name_for("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name_for("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name_for("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name_for("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected: str, rules: str) -> None:
    assert str(PrincipalMapper.parse(rules)) == f"SslPrincipalMapper(rules = {expected})"


def test_comma_with_whitespace() -> None:
    mapper = PrincipalMapper.parse("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name_for("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_back_references_beyond_the_groups_are_literal() -> None:
    # Kafka's escapeLiteralBackReferences: with one group, $12 is $1 then "2", and $3 stays "$3".
    assert PrincipalMapper.parse("RULE:^CN=(.*)$/$12-$3/").name_for("CN=x") == "x2-$3"


def test_no_matching_rule() -> None:
    with pytest.raises(PrincipalMappingError, match="no rule"):
        PrincipalMapper.parse("RULE:^CN=admin$/admin/").name_for("CN=alice")


# --- X.500 names as Java's X500Principal.getName() prints them ---------------------------------------------


def _name(*rdns: list[x509.NameAttribute]) -> bytes:
    return x509.Name([x509.RelativeDistinguishedName(rdn) for rdn in rdns]).public_bytes()


def test_rfc2253_order_is_the_reverse_of_the_encoding() -> None:
    der = _name([x509.NameAttribute(NameOID.COUNTRY_NAME, "US")],
                [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "acme")],
                [x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "eng")],
                [x509.NameAttribute(NameOID.COMMON_NAME, "alice")])
    assert rfc2253_name(der) == "CN=alice,OU=eng,O=acme,C=US"


def test_rfc2253_escapes_as_java_does() -> None:
    der = _name([x509.NameAttribute(NameOID.COMMON_NAME, " Tkac, Adam=#1+<x>;\"\\ ")])
    assert rfc2253_name(der) == "CN=\\ Tkac\\, Adam\\=\\#1\\+\\<x\\>\\;\\\"\\\\\\ "


def test_rfc2253_keywords_and_hex_for_other_attributes() -> None:
    der = _name([x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "com")],
                [x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
                 x509.NameAttribute(NameOID.LOCALITY_NAME, "Fulton")],
                [x509.NameAttribute(NameOID.USER_ID, "u1")],
                [x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c")],
                [x509.NameAttribute(NameOID.SERIAL_NUMBER, "42")],
                [x509.NameAttribute(NameOID.COMMON_NAME, "José")])
    # emailAddress and serialNumber have no RFC 2253 keyword: OID and the DER value in hex (IA5String 0x16,
    # PrintableString 0x13). A multi-valued RDN keeps its encoded order, joined by '+'.
    assert rfc2253_name(der) == ("CN=José,2.5.4.5=#13023432,1.2.840.113549.1.9.1=#16056140622e63,UID=u1,"
                                 "ST=MD+L=Fulton,DC=com")


def test_rfc2253_subject_of_a_real_certificate(alice: ClientCertificate) -> None:
    cert = x509.load_pem_x509_certificate(alice.cert.read_bytes())
    assert rfc2253_subject(cert.public_bytes(serialization.Encoding.DER)) == ALICE_SUBJECT
    # cryptography's RFC 4514 rendering agrees for plain names.
    assert cert.subject.rfc4514_string() == ALICE_SUBJECT


def test_certificate_with_a_long_subject(certs: TestCertificates) -> None:
    """A Name past 127 bytes uses DER's long length form."""
    ca_key = serialization.load_pem_private_key(certs.ca_key.read_bytes(), password=None)
    ca_cert = x509.load_pem_x509_certificate(certs.ca_cert.read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "o" * 60),
                         x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "u" * 60),
                         x509.NameAttribute(NameOID.COMMON_NAME, "c" * 60)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(1)
            .not_valid_before(ca_cert.not_valid_before_utc).not_valid_after(ca_cert.not_valid_after_utc)
            .sign(ca_key, hashes.SHA256()))
    assert len(subject.public_bytes()) > 127
    assert rfc2253_subject(cert.public_bytes(serialization.Encoding.DER)) == \
        f"CN={'c' * 60},OU={'u' * 60},O={'o' * 60}"
