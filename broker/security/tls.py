"""TLS for SSL and SASL_SSL listeners, configured with Kafka's `ssl.*` keys; the principal of a client
certificate, as Kafka's DefaultKafkaPrincipalBuilder and SslPrincipalMapper build it.

Every key can be given per listener as `listener.name.<listener, lower-case>.<key>`, which wins over the
plain key (Kafka's ListenerName.configPrefix). Key stores: PEM (a file, or inline PEM in the config) and
PKCS12 (read with the `cryptography` package); JKS needs a JVM and is refused with the keytool command
that converts it. The broker never prompts for a key's password: an encrypted key without
`ssl.key.password` is a ConfigError.
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import structlog
from minikafka.broker.config.config import BROKER_CONFIGS, ConfigError
from minikafka.broker.security.session import ANONYMOUS, SASL_SSL, KafkaPrincipal

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.serialization import KeySerializationEncryption

_log = structlog.get_logger("minikafka.tls")

_PROTOCOLS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)
_JKS_HELP = ("JKS key stores need a JVM; convert it with `keytool -importkeystore -srckeystore <file>.jks "
             "-destkeystore <file>.p12 -deststoretype PKCS12` and use ssl.{store}.type=PKCS12, or PEM "
             "(`openssl pkcs12 -in <file>.p12 -nodes`)")


@dataclass(frozen=True, slots=True)
class _Setting:
    key: str  # the key the value came from: the listener's own key when it set one
    value: str | None


def listener_setting(properties: Mapping[str, str], listener_name: str, key: str) -> _Setting:
    """`listener.name.<listener>.<key>`, else `<key>`, else the default in BROKER_CONFIGS."""
    prefixed = f"listener.name.{listener_name.lower()}.{key}"
    if prefixed in properties:
        return _Setting(prefixed, properties[prefixed])
    if key in properties:
        return _Setting(key, properties[key])
    spec = BROKER_CONFIGS.get(key)
    return _Setting(key, spec.default if spec else None)


def _given(setting: _Setting) -> str | None:
    """The value, or None when unset or blank (Kafka treats an empty location as unset)."""
    return setting.value if setting.value is not None and setting.value.strip() else None


def server_context(properties: Mapping[str, str], listener_name: str,
                   security_protocol: str | None = None) -> ssl.SSLContext:
    """The TLS context of one SSL or SASL_SSL listener, built once when the listener starts.
    `security_protocol` defaults to the listener's in listener.security.protocol.map."""

    def setting(key: str) -> _Setting:
        return listener_setting(properties, listener_name, key)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_protocols(context, setting("ssl.enabled.protocols"))
    _load_keystore(context, setting, listener_name)
    client_auth = setting("ssl.client.auth")
    protocol = security_protocol or _security_protocol(properties, listener_name)
    if protocol == SASL_SSL and not client_auth.key.startswith("listener.name."):
        # Kafka's ChannelBuilders: on SASL_SSL only the listener's own ssl.client.auth counts (KIP-684).
        if (client_auth.value or "none").strip().lower() != "none":
            _log.warning("ssl.client.auth applies to SSL listeners only; set "
                         f"listener.name.{listener_name.lower()}.ssl.client.auth for a SASL_SSL listener",
                         listener=listener_name)
        client_auth = _Setting(client_auth.key, "none")
    mode = _CLIENT_AUTH.get((client_auth.value or "none").strip().lower())
    if mode is None:
        raise ConfigError(f"invalid value {client_auth.value!r} for configuration {client_auth.key}: "
                          "one of none, requested, required")
    _load_truststore(context, setting, needed=mode != ssl.CERT_NONE)
    context.verify_mode = mode
    cipher_suites = setting("ssl.cipher.suites")
    if _given(cipher_suites):
        _set_cipher_suites(context, cipher_suites)
    # As in Kafka, a rule that does not parse stops the broker at start, not at the first client.
    principal_mapper(properties, listener_name)
    return context


def _security_protocol(properties: Mapping[str, str], listener_name: str) -> str:
    key = "listener.security.protocol.map"
    mapping = properties.get(key) or BROKER_CONFIGS[key].default or ""
    for item in mapping.split(","):
        name, _, protocol = item.partition(":")
        if name.strip().upper() == listener_name.upper():
            return protocol.strip().upper()
    return listener_name.upper()


def _set_protocols(context: ssl.SSLContext, setting: _Setting) -> None:
    names = [name.strip() for name in (setting.value or "").split(",") if name.strip()]
    unknown = [name for name in names if name not in _PROTOCOLS]
    if unknown or not names:
        raise ConfigError(f"invalid value {setting.value!r} for configuration {setting.key}: a list of "
                          f"{', '.join(_PROTOCOLS)}")
    # OpenSSL takes a range, not a set: a list with a gap (TLSv1,TLSv1.2) enables what lies between.
    versions = sorted(_PROTOCOLS[name] for name in names)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def _load_keystore(context: ssl.SSLContext, setting: Callable[[str], _Setting], listener_name: str) -> None:
    store_type = setting("ssl.keystore.type")
    kind = (store_type.value or "PEM").strip().upper()
    location = setting("ssl.keystore.location")
    chain = setting("ssl.keystore.certificate.chain")
    key = setting("ssl.keystore.key")
    store_password = setting("ssl.keystore.password")
    key_password = setting("ssl.key.password")
    if kind == "JKS":
        raise ConfigError(f"{store_type.key}=JKS is not supported: {_JKS_HELP.format(store='keystore')}")
    if kind not in ("PEM", "PKCS12"):
        raise ConfigError(f"invalid value {store_type.value!r} for configuration {store_type.key}: PEM or PKCS12")
    if _given(chain) or _given(key):
        if kind != "PEM":
            raise ConfigError(f"{chain.key} and {key.key} need {store_type.key}=PEM")
        if not (_given(chain) and _given(key)):
            missing = key if _given(chain) else chain
            raise ConfigError(f"{missing.key} must be set with {chain.key if missing is key else key.key}")
        if _given(location):
            raise ConfigError(f"{location.key} cannot be set with {chain.key} and {key.key}: one key store")
        if _given(store_password):
            raise ConfigError(f"{store_password.key} cannot be set with a PEM key store; the key's "
                              "password is ssl.key.password")
        key_text = _normalized_pem(key, kinds=("PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "EC PRIVATE KEY",
                                               "RSA PRIVATE KEY"))
        chain_text = _normalized_pem(chain, kinds=("CERTIFICATE",))
        with _private_file(key_text + chain_text) as path:
            _load_chain(context, path, pem_text=key_text, source=key, password=key_password)
        return
    path_text = _given(location)
    if path_text is None:
        raise ConfigError(f"listener {listener_name} needs a private key and certificate: set "
                          f"{location.key} (a PEM file holding both), or ssl.keystore.certificate.chain and "
                          "ssl.keystore.key")
    data = _read(location)
    if kind == "PKCS12":
        key_pem, chain_pem = _pkcs12_keystore(data, store_password, key_password, location)
        with _private_file(key_pem + chain_pem) as path:
            _load_chain(context, path, pem_text=key_pem, source=location, password=key_password)
        return
    if _given(store_password):
        raise ConfigError(f"{store_password.key} cannot be set with a PEM key store; the key's password is "
                          "ssl.key.password")
    text = data.decode("ascii", errors="replace")
    if "PRIVATE KEY-----" not in text or "BEGIN CERTIFICATE" not in text:
        raise ConfigError(f"{location.key}: {path_text} must hold a PEM private key and its certificate chain")
    _load_chain(context, path_text, pem_text=text, source=location, password=key_password)


def _load_chain(context: ssl.SSLContext, path: str, *, pem_text: str, source: _Setting,
                password: _Setting) -> None:
    encrypted = "BEGIN ENCRYPTED PRIVATE KEY" in pem_text or "Proc-Type: 4,ENCRYPTED" in pem_text
    secret = _given(password)
    if encrypted and secret is None:
        raise ConfigError(f"the private key in {source.key} is encrypted: set {password.key}")
    try:
        # Never None: OpenSSL would prompt for a password on the terminal.
        context.load_cert_chain(path, password=(secret or "").encode())
    except ssl.SSLError as exc:
        if encrypted:
            raise ConfigError(f"cannot decrypt the private key in {source.key} with {password.key}: "
                              f"{exc.reason or exc}") from None
        raise ConfigError(f"invalid key store in {source.key}: {exc.reason or exc} (a PEM private key and "
                          "the certificate chain that starts with its certificate)") from None


def _load_truststore(context: ssl.SSLContext, setting: Callable[[str], _Setting], *, needed: bool) -> None:
    store_type = setting("ssl.truststore.type")
    kind = (store_type.value or "PEM").strip().upper()
    location = setting("ssl.truststore.location")
    certificates = setting("ssl.truststore.certificates")
    password = setting("ssl.truststore.password")
    if kind == "JKS" and (_given(location) or needed):
        raise ConfigError(f"{store_type.key}=JKS is not supported: {_JKS_HELP.format(store='truststore')}")
    if kind not in ("PEM", "PKCS12", "JKS"):
        raise ConfigError(f"invalid value {store_type.value!r} for configuration {store_type.key}: PEM or PKCS12")
    if _given(certificates):
        if kind != "PEM":
            raise ConfigError(f"{certificates.key} needs {store_type.key}=PEM")
        if _given(location):
            raise ConfigError(f"{location.key} cannot be set with {certificates.key}: one trust store")
        _add_trusted(context, _normalized_pem(certificates, kinds=("CERTIFICATE",)), certificates)
        return
    if _given(location):
        data = _read(location)
        if kind == "PKCS12":
            _add_trusted(context, _pkcs12_truststore(data, password, location), location)
            return
        if _given(password):
            raise ConfigError(f"{password.key} cannot be set with a PEM trust store")
        _add_trusted(context, data.decode("ascii", errors="replace"), location)
        return
    if needed:
        # Kafka falls back to the JVM's trust store; ours is the system's.
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)


def _add_trusted(context: ssl.SSLContext, pem_text: str, source: _Setting) -> None:
    if "BEGIN CERTIFICATE" not in pem_text:
        raise ConfigError(f"{source.key}: no PEM certificate found")
    try:
        context.load_verify_locations(cadata=pem_text)
    except ssl.SSLError as exc:
        raise ConfigError(f"invalid trust store in {source.key}: {exc.reason or exc}") from None


def _set_cipher_suites(context: ssl.SSLContext, setting: _Setting) -> None:
    """Kafka names suites as Java does (IANA: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256); OpenSSL names are
    accepted too. OpenSSL (through Python) cannot narrow the TLS 1.3 suites, which are always the
    default three; a list of TLS 1.3 suites only turns TLS 1.2 off, as it would in Java."""
    names = [name.strip() for name in (setting.value or "").split(",") if name.strip()]
    tls13 = [name for name in names if _is_tls13_suite(name)]
    openssl_names = [_openssl_cipher_name(name) for name in names if name not in tls13]
    if not openssl_names:
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        if context.maximum_version < ssl.TLSVersion.TLSv1_3:
            raise ConfigError(f"{setting.key} lists only TLS 1.3 suites, but ssl.enabled.protocols has no TLSv1.3")
        return
    try:
        context.set_ciphers(":".join(openssl_names))
    except ssl.SSLError:
        raise ConfigError(f"invalid value {setting.value!r} for configuration {setting.key}: no cipher suite "
                          "known to OpenSSL") from None
    enabled = {cipher["name"] for cipher in context.get_ciphers()}
    unknown = [name for name, openssl in zip([n for n in names if n not in tls13], openssl_names, strict=True)
               if openssl not in enabled]
    if unknown:
        raise ConfigError(f"invalid value {setting.value!r} for configuration {setting.key}: unknown cipher "
                          f"suites {', '.join(unknown)}")


def _is_tls13_suite(name: str) -> bool:
    return name in ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256",
                    "TLS_AES_128_CCM_SHA256", "TLS_AES_128_CCM_8_SHA256")


_KEY_EXCHANGES = {"ECDHE_ECDSA": "ECDHE-ECDSA-", "ECDHE_RSA": "ECDHE-RSA-", "DHE_RSA": "DHE-RSA-",
                  "DHE_DSS": "DHE-DSS-", "RSA": ""}


def _openssl_cipher_name(name: str) -> str:
    """TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 -> ECDHE-RSA-AES128-GCM-SHA256, the OpenSSL spelling."""
    match = re.fullmatch(r"TLS_(\w+?)_WITH_(AES_(?:128|256))_(GCM|CBC|CCM)_(SHA384|SHA256|SHA)", name)
    if match and match.group(1) in _KEY_EXCHANGES:
        prefix, cipher = _KEY_EXCHANGES[match.group(1)], match.group(2).replace("_", "")
        mode, digest = match.group(3), match.group(4)
        if mode == "CBC":
            return f"{prefix}{cipher}-{digest}"
        return f"{prefix}{cipher}-{mode}-{digest}" if prefix else f"{cipher}-{mode}-{digest}"
    match = re.fullmatch(r"TLS_(\w+?)_WITH_CHACHA20_POLY1305_SHA256", name)
    if match and match.group(1) in _KEY_EXCHANGES:
        return f"{_KEY_EXCHANGES[match.group(1)]}CHACHA20-POLY1305"
    return name


def _read(setting: _Setting) -> bytes:
    path = Path(setting.value or "")
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read {path} ({setting.key}): {exc.strerror or exc}") from None


def _normalized_pem(setting: _Setting, *, kinds: tuple[str, ...]) -> str:
    """Inline PEM as a properties file delivers it: a continued line loses its line breaks, so the
    base64 body is re-wrapped (Kafka's PemParser ignores the whitespace the same way)."""
    blocks = []
    for match in _PEM_BLOCK.finditer(setting.value or ""):
        if match.group(1) not in kinds:
            continue
        body = "".join(match.group(2).split())
        lines = [body[i:i + 64] for i in range(0, len(body), 64)]
        blocks.append("\n".join([f"-----BEGIN {match.group(1)}-----", *lines, f"-----END {match.group(1)}-----"]))
    if not blocks:
        raise ConfigError(f"{setting.key}: no PEM {' or '.join(kinds[:2])} block found")
    return "\n".join(blocks) + "\n"


@contextmanager
def _private_file(text: str) -> Iterator[str]:
    """OpenSSL loads a key pair only from a file: a 0600 temporary file, removed right after loading."""
    fd, path = tempfile.mkstemp(prefix="minikafka-tls-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as file:
            file.write(text)
        yield path
    finally:
        os.unlink(path)


def _serialization(location: _Setting) -> ModuleType:
    """cryptography's serialization module, or a ConfigError naming the key and what to install: without the
    `tls` extra a PKCS12 store must stop the broker with one line, not an ImportError's traceback."""
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: F401  (imported for use below)
    except ImportError:
        raise ConfigError(f"{location.key}={location.value}: PKCS12 stores are read with the `cryptography` "
                          "package, which is not installed (pip install 'minikafka[tls]'), or convert it to PEM: "
                          "`openssl pkcs12 -in <file>.p12 -nodes`") from None
    return serialization


def _pkcs12(data: bytes, password: _Setting, location: _Setting) -> tuple[object, object, list[object]]:
    pkcs12 = _serialization(location).pkcs12
    secret = _given(password)
    try:
        key, certificate, extra = pkcs12.load_key_and_certificates(data, secret.encode() if secret else None)
    except ValueError as exc:
        raise ConfigError(f"cannot open the PKCS12 store {location.value} ({location.key}) with "
                          f"{password.key}: {exc}") from None
    return key, certificate, list(extra)


def _pkcs12_keystore(data: bytes, store_password: _Setting, key_password: _Setting,
                     location: _Setting) -> tuple[str, str]:
    serialization = _serialization(location)
    key, certificate, extra = _pkcs12(data, store_password, location)
    if key is None or certificate is None:
        raise ConfigError(f"{location.key}: the PKCS12 store holds no private key with its certificate")
    secret = _given(key_password)
    # Re-encrypted with ssl.key.password, if any, so the temporary file never holds the key in clear
    # when the user asked for an encrypted one.
    encryption: KeySerializationEncryption = (
        serialization.BestAvailableEncryption(secret.encode()) if secret else serialization.NoEncryption())
    key_pem = key.private_bytes(serialization.Encoding.PEM,  # type: ignore[attr-defined]
                                serialization.PrivateFormat.PKCS8, encryption).decode()
    chain = [certificate, *extra]
    chain_pem = "".join(cert.public_bytes(serialization.Encoding.PEM).decode()  # type: ignore[attr-defined]
                        for cert in chain)
    return key_pem, chain_pem


def _pkcs12_truststore(data: bytes, password: _Setting, location: _Setting) -> str:
    serialization = _serialization(location)

    _key, certificate, extra = _pkcs12(data, password, location)
    certs = [cert for cert in (certificate, *extra) if cert is not None]
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode()  # type: ignore[attr-defined]
                   for cert in certs)


# --- principals ------------------------------------------------------------------------------------------


class PrincipalMappingError(ConnectionAbortedError):
    """No ssl.principal.mapping.rules rule matches a client's name: Kafka fails that client's
    authentication and closes the connection. An OSError, so the server handles it as any connection
    that failed during setup: closed, nothing else affected."""


_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT, the name unchanged
    replacement: str = ""
    case: str = ""  # "L", "U" or ""

    def __str__(self) -> str:
        """As Kafka's Rule.toString, which its tests (and log lines) show."""
        if self.pattern is None:
            return "DEFAULT"
        case = f"/{self.case}" if self.case else ""
        return f"RULE:{self.pattern.pattern}/{self.replacement}{case}"

    def apply(self, name: str) -> str | None:
        if self.pattern is None:
            return name
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        # Java's String.replaceAll: every match of the pattern, not only the one that matched the whole name.
        replacement = _escape_literal_back_references(self.replacement, self.pattern.groups)
        result = self.pattern.sub(lambda m: _java_replacement(replacement, m), name)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result


def _escape_literal_back_references(replacement: str, groups: int) -> str:
    """Kafka's escapeLiteralBackReferences: `$12` with fewer groups reads as `$1` then `2`, and a
    reference to a group that does not exist is kept as literal text."""
    if groups == 0:
        return replacement
    value = replacement
    position = 0
    while (match := _BACK_REFERENCE.search(value, position)) is not None:
        digits = match.group(1)
        position = match.end()
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = match.start(1)
            value = value[: start - 1] + "\\" + value[start - 1 :]
            position = match.end() + 1
    return value


def _java_replacement(template: str, match: re.Match[str]) -> str:
    """Matcher.appendReplacement's template language: `$n` and `${name}` are groups, `\\x` is x."""
    out: list[str] = []
    i = 0
    while i < len(template):
        char = template[i]
        if char == "\\" and i + 1 < len(template):
            out.append(template[i + 1])
            i += 2
        elif char == "$" and i + 1 < len(template):
            if template[i + 1] == "{":
                end = template.index("}", i)
                out.append(match.group(template[i + 2 : end]) or "")
                i = end + 1
                continue
            if not template[i + 1].isdigit():
                raise PrincipalMappingError(f"illegal group reference in replacement {template!r}")
            index = int(template[i + 1])
            i += 2
            # As Java: take more digits while the number still names an existing group.
            while i < len(template) and template[i].isdigit() and index * 10 + int(template[i]) <= match.re.groups:
                index = index * 10 + int(template[i])
                i += 1
            if index > match.re.groups:
                raise PrincipalMappingError(f"no group {index} in replacement {template!r}")
            out.append(match.group(index) or "")
        else:
            out.append(char)
            i += 1
    return "".join(out)


@dataclass(frozen=True, slots=True)
class PrincipalMapper:
    """Kafka's SslPrincipalMapper: the first rule that matches the X.500 name gives the user name."""

    rules: tuple[_Rule, ...]
    text: str = "DEFAULT"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(str(rule) for rule in self.rules)}])"

    @classmethod
    def parse(cls, text: str | None, key: str = "ssl.principal.mapping.rules") -> PrincipalMapper:
        source = "DEFAULT" if text is None else text
        rules: list[_Rule] = []
        for split in _RULE_SPLITTER.finditer(source.strip()):
            rule = split.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ConfigError(f"invalid value {text!r} for configuration {key}: invalid rule `{rule}`")
            if parsed.group(1) is not None:
                rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                try:
                    pattern = re.compile(parsed.group(2))
                except re.error as exc:
                    raise ConfigError(f"invalid value {text!r} for configuration {key}: rule `{rule}`: {exc}") from None
                rules.append(_Rule(pattern, parsed.group(4), parsed.group(6)))
        return cls(tuple(rules), source)

    def name_for(self, distinguished_name: str) -> str:
        for rule in self.rules:
            name = rule.apply(distinguished_name)
            if name is not None:
                return name
        raise PrincipalMappingError(f"no rule of ssl.principal.mapping.rules ({self.text}) applies to "
                                    f"{distinguished_name}")


def principal_mapper(properties: Mapping[str, str], listener_name: str) -> PrincipalMapper:
    setting = listener_setting(properties, listener_name, "ssl.principal.mapping.rules")
    return PrincipalMapper.parse(setting.value, setting.key)


def principal_builder(properties: Mapping[str, str],
                      listener_name: str) -> Callable[[ssl.SSLObject | ssl.SSLSocket | None], KafkaPrincipal]:
    """principal_for_peer with this listener's rules, parsed once when the listener starts."""
    mapper = principal_mapper(properties, listener_name)

    def build(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> KafkaPrincipal:
        try:
            principal = principal_for_peer(ssl_object, mapper)
        except PrincipalMappingError as exc:
            _log.warning("failed authentication: no principal for the client certificate", listener=listener_name,
                         error=str(exc))
            raise
        if principal is not ANONYMOUS:
            # Who a certificate turned out to be is what a user debugging ACLs or rules needs to see.
            _log.info("TLS client authenticated", listener=listener_name, principal=str(principal))
        return principal

    return build


def principal_for_peer(ssl_object: ssl.SSLObject | ssl.SSLSocket | None,
                       rules: PrincipalMapper) -> KafkaPrincipal:
    """DefaultKafkaPrincipalBuilder on an SSL connection: User:<the client certificate's subject as
    X500Principal.getName() prints it, mapped by the rules>, or User:ANONYMOUS without a certificate.
    Raises PrincipalMappingError when no rule applies (Kafka then fails the client's authentication)."""
    der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
    if not der:
        return ANONYMOUS
    return KafkaPrincipal("User", rules.name_for(rfc2253_subject(der)))


# --- X.500 names, as Java prints them ----------------------------------------------------------------------

# sun.security.x509.AVAKeyword's RFC 2253 keywords; any other attribute prints as its OID and hex DER.
_RFC2253_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
    "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
}
# AVA.isDerString (non-canonical): the string types Java prints as text, with their encodings.
_STRING_TAGS = {0x13: "ascii", 0x14: "latin-1", 0x16: "ascii", 0x1B: "ascii", 0x1E: "utf-16-be", 0x0C: "utf-8"}
_ESCAPED = set(',=+<>#;"\\')


def _tlv(data: bytes, offset: int) -> tuple[int, int, int]:
    """(tag, start of content, end) of the DER element at offset."""
    if offset + 2 > len(data):
        raise ValueError("truncated DER")
    tag, length = data[offset], data[offset + 1]
    start = offset + 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or start + count > len(data):
            raise ValueError("unsupported DER length")
        length = int.from_bytes(data[start : start + count], "big")
        start += count
    end = start + length
    if end > len(data):
        raise ValueError("truncated DER")
    return tag, start, end


def _children(data: bytes, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(tag, element start, content start, end) of each element between start and end."""
    offset = start
    while offset < end:
        tag, content, element_end = _tlv(data, offset)
        yield tag, offset, content, element_end
        offset = element_end


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs:
        raise ValueError("empty OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(str(arc) for arc in [first, arcs[0] - 40 * first, *arcs[1:]])


def _escape_value(text: str) -> str:
    chars = ["\\00" if char == "\0" else f"\\{char}" if char in _ESCAPED else char for char in text]
    # Leading and trailing spaces (and carriage returns) are escaped, as AVA.toRFC2253String does.
    lead = 0
    while lead < len(chars) and chars[lead] in (" ", "\r"):
        chars[lead] = "\\" + chars[lead]
        lead += 1
    trail = len(chars) - 1
    while trail >= lead and chars[trail] in (" ", "\r"):
        chars[trail] = "\\" + chars[trail]
        trail -= 1
    return "".join(chars)


def _attribute(data: bytes, start: int, end: int) -> str:
    parts = list(_children(data, start, end))
    if len(parts) != 2 or parts[0][0] != 0x06:
        raise ValueError("invalid AttributeTypeAndValue")
    _, _, oid_start, oid_end = parts[0]
    oid = _oid(data[oid_start:oid_end])
    tag, element_start, content_start, value_end = parts[1]
    keyword = _RFC2253_KEYWORDS.get(oid)
    encoding = _STRING_TAGS.get(tag)
    if keyword is None or encoding is None:
        return f"{keyword or oid}=#{data[element_start:value_end].hex()}"
    return f"{keyword}={_escape_value(data[content_start:value_end].decode(encoding, errors='replace'))}"


def rfc2253_name(name_der: bytes) -> str:
    """An X.500 Name (DER) as Java's X500Principal.getName() prints it: the last RDN first, `+` between
    the attributes of one RDN in their encoded order."""
    tag, start, end = _tlv(name_der, 0)
    if tag != 0x30:
        raise ValueError("a Name is a SEQUENCE")
    rdns = []
    for rdn_tag, _, rdn_start, rdn_end in _children(name_der, start, end):
        if rdn_tag != 0x31:
            raise ValueError("an RDN is a SET")
        rdns.append("+".join(_attribute(name_der, s, e) for _, _, s, e in _children(name_der, rdn_start, rdn_end)))
    return ",".join(reversed(rdns))


def rfc2253_subject(certificate_der: bytes) -> str:
    """The subject of a DER certificate, as rfc2253_name prints it."""
    _, cert_start, _ = _tlv(certificate_der, 0)
    _, tbs_start, tbs_end = _tlv(certificate_der, cert_start)
    fields = list(_children(certificate_der, tbs_start, tbs_end))
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5:
        raise ValueError("truncated TBSCertificate")
    _, subject_start, _, subject_end = fields[4]
    return rfc2253_name(certificate_der[subject_start:subject_end])
