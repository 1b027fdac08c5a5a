"""A throwaway certificate authority for TLS tests: a CA, a server certificate for 127.0.0.1 and localhost,
and client certificates with the subjects a test asks for, written as PEM files. EC P-256 keys, so a
whole set takes milliseconds. Needs the `cryptography` package.

    certs = generate_certificates(tmp_path)            # or: python -m minikafka.testing.certs DIR
    broker_properties = certs.broker_properties(client_auth="required")
    alice = certs.client("alice", "CN=alice,OU=eng,O=acme")
    # confluent-kafka: {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
    #                   "ssl.certificate.location": str(alice.cert), "ssl.key.location": str(alice.key)}

Files in the directory: ca.pem (the CA certificate: the clients' trust store), ca.key, server.pem (the
server certificate, then the CA's), server.key, server-keystore.pem (key then chain: Kafka's PEM
ssl.keystore.location), server-keystore-encrypted.pem (the same, key encrypted with `key_password`), and
per client <name>.pem, <name>.key, <name>-keystore.pem.
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ModuleNotFoundError as exc:  # pragma: no cover - depends on the environment
    # Still a ModuleNotFoundError naming the package, so callers can tell a missing extra from a bug.
    raise ModuleNotFoundError("minikafka.testing.certs needs the `cryptography` package: "
                              "pip install 'minikafka[tls]'", name="cryptography") from exc

DEFAULT_KEY_PASSWORD = "minikafka-test"
DEFAULT_HOSTS = ("127.0.0.1", "::1", "localhost")
_VALID_FOR = datetime.timedelta(days=825)
# Certificates start a day early so a client whose clock lags a little still accepts them.
_BACKDATE = datetime.timedelta(days=1)

_PrivateKey = ec.EllipticCurvePrivateKey


@dataclass(frozen=True, slots=True)
class ClientCertificate:
    name: str
    subject: str  # as given (RFC 4514); the broker's principal is User:<this name, RFC 2253 as Java prints it>
    cert: Path  # the client certificate, then the CA's
    key: Path  # PKCS#8, unencrypted
    keystore: Path  # key then chain, one file


@dataclass(frozen=True, slots=True)
class TestCertificates:
    __test__ = False  # not a pytest test class, despite the name

    directory: Path
    ca_cert: Path
    ca_key: Path
    server_cert: Path
    server_key: Path
    server_keystore: Path
    server_keystore_encrypted: Path
    key_password: str

    def client(self, name: str, subject: str | None = None) -> ClientCertificate:
        """A new client certificate signed by the CA (`subject` defaults to CN=<name>), replacing any file of
        that name."""
        subject = subject or f"CN={name}"
        certificate = ClientCertificate(name, subject, self.directory / f"{name}.pem",
                                        self.directory / f"{name}.key", self.directory / f"{name}-keystore.pem")
        ca_key = serialization.load_pem_private_key(self.ca_key.read_bytes(), password=None)
        ca_cert = x509.load_pem_x509_certificate(self.ca_cert.read_bytes())
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _leaf(x509.Name.from_rfc4514_string(subject), key, ca_cert, ca_key,
                     usage=ExtendedKeyUsageOID.CLIENT_AUTH, hosts=())
        _write_leaf(certificate.cert, certificate.key, certificate.keystore, key, cert, ca_cert)
        return certificate

    def broker_properties(self, listener: str = "SSL", *, client_auth: str = "none",
                          encrypted_key: bool = False) -> dict[str, str]:
        """Kafka's keys for a TLS listener named `listener` with these files (prefixed with
        listener.name.<listener>., so other listeners keep their own settings)."""
        prefix = f"listener.name.{listener.lower()}."
        keystore = self.server_keystore_encrypted if encrypted_key else self.server_keystore
        properties = {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(self.ca_cert),
            "ssl.client.auth": client_auth,
        }
        if encrypted_key:
            properties["ssl.key.password"] = self.key_password
        return {prefix + key: value for key, value in properties.items()}


def generate_certificates(directory: Path | str, *, hosts: Sequence[str] = DEFAULT_HOSTS,
                          key_password: str = DEFAULT_KEY_PASSWORD,
                          ca_subject: str = "CN=minikafka test CA,O=minikafka") -> TestCertificates:
    """A new CA and server certificate in `directory` (created if missing; files there are replaced)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name.from_rfc4514_string(ca_subject)
    now = datetime.datetime.now(datetime.UTC)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    certs = TestCertificates(
        directory=directory,
        ca_cert=directory / "ca.pem",
        ca_key=directory / "ca.key",
        server_cert=directory / "server.pem",
        server_key=directory / "server.key",
        server_keystore=directory / "server-keystore.pem",
        server_keystore_encrypted=directory / "server-keystore-encrypted.pem",
        key_password=key_password,
    )
    certs.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    _write_private(certs.ca_key, _pkcs8(ca_key))
    server_key = ec.generate_private_key(ec.SECP256R1())
    server_cert = _leaf(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "localhost")]),
                        server_key, ca_cert, ca_key, usage=ExtendedKeyUsageOID.SERVER_AUTH, hosts=hosts)
    _write_leaf(certs.server_cert, certs.server_key, certs.server_keystore, server_key, server_cert, ca_cert)
    chain = _chain(server_cert, ca_cert)
    _write_private(certs.server_keystore_encrypted, _pkcs8(server_key, key_password) + chain)
    return certs


def _leaf(subject: x509.Name, key: _PrivateKey, ca_cert: x509.Certificate, ca_key: _PrivateKey, *,
          usage: x509.ObjectIdentifier, hosts: Sequence[str]) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + _VALID_FOR)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_agreement=True, key_cert_sign=False,
                                     crl_sign=False, content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, encipher_only=False, decipher_only=False),
                       critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if hosts:
        builder = builder.add_extension(x509.SubjectAlternativeName([_general_name(host) for host in hosts]),
                                        critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _general_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def _pkcs8(key: _PrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)


def _chain(cert: x509.Certificate, ca_cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM) + ca_cert.public_bytes(serialization.Encoding.PEM)


def _write_private(path: Path, data: bytes) -> None:
    path.touch(mode=0o600)
    path.chmod(0o600)
    path.write_bytes(data)


def _write_leaf(cert_path: Path, key_path: Path, keystore_path: Path, key: _PrivateKey, cert: x509.Certificate,
                ca_cert: x509.Certificate) -> None:
    chain = _chain(cert, ca_cert)
    cert_path.write_bytes(chain)
    _write_private(key_path, _pkcs8(key))
    _write_private(keystore_path, _pkcs8(key) + chain)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m minikafka.testing.certs",
                                     description="Write a test CA, a server certificate and client certificates.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--host", action="append", dest="hosts",
                        help=f"a name or IP of the server certificate (repeatable; default {', '.join(DEFAULT_HOSTS)})")
    parser.add_argument("--client", action="append", default=[], metavar="NAME[=SUBJECT]",
                        help="a client certificate NAME.pem / NAME.key, subject CN=NAME unless given (repeatable)")
    parser.add_argument("--key-password", default=DEFAULT_KEY_PASSWORD,
                        help="password of server-keystore-encrypted.pem's key")
    args = parser.parse_args(argv)
    certs = generate_certificates(args.directory, hosts=args.hosts or DEFAULT_HOSTS, key_password=args.key_password)
    for item in args.client:
        name, _, subject = item.partition("=")
        certs.client(name, subject or None)
    print(f"wrote {certs.ca_cert}, {certs.server_keystore} and {len(args.client)} client certificate(s) "
          f"in {certs.directory}")


if __name__ == "__main__":
    main()
