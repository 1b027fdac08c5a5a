"""Broker configuration, read the way Kafka reads it.

Sources, later ones winning: a `server.properties` file (Kafka's key names), `MINIKAFKA_*`
environment variables (`MINIKAFKA_LOG_RETENTION_MS` -> `log.retention.ms`), `--override key=value`
as in kafka-server-start, then the explicit `--host/--port/--data-dir` flags. Unknown keys are
warned about (Kafka logs them as unused); a bad value is a `ConfigError` naming key and value.
"""

from __future__ import annotations

import ipaddress
import itertools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from minikafka.broker.config.versions import NEWEST as NEWEST_KAFKA_VERSION
from minikafka.broker.config.versions import UnknownKafkaVersion, profile_defaults, resolve
from minikafka.storage.config import BROKER_LOG_KEYS, LogConfig, log_config_from_broker_properties
from minikafka.storage.errors import InvalidConfig

ENV_PREFIX = "MINIKAFKA_"


class ConfigError(ValueError):
    """A configuration value that cannot be used; the message names the key."""


@dataclass(frozen=True, slots=True)
class BrokerConfigDef:
    name: str
    type: str  # Kafka's ConfigDef type names: int, long, boolean, string, list, double
    default: str | None
    doc: str


def _defs(*rows: tuple[str, str, str | None, str]) -> dict[str, BrokerConfigDef]:
    return {row[0]: BrokerConfigDef(*row) for row in rows}


# The broker-level keys minikafka honours, with Kafka's defaults (except where noted in doc).
BROKER_CONFIGS: dict[str, BrokerConfigDef] = _defs(
    ("node.id", "int", "1", "This node's id."),
    ("broker.id", "int", "1", "Alias of node.id (ZooKeeper-era name)."),
    ("listeners", "list", "PLAINTEXT://127.0.0.1:9092",
     "Listeners to bind, `NAME://host:port`, comma-separated; every node binds each (docs/security.md)."),
    ("advertised.listeners", "list", None,
     "Addresses given to clients, by listener name; a listener not named here advertises its bound address."),
    ("listener.security.protocol.map", "list",
     "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
     "Security protocol of each listener name, `NAME:PROTOCOL`."),
    ("controller.listener.names", "list", None,
     "KRaft controller listeners: listed in `listeners` by Kafka's configs, not served here (there is no quorum)."),
    ("minikafka.nodes", "int", "1",
     "minikafka: number of nodes served by this one process (docs/cluster.md): ids node.id, node.id+1, ...; "
     "node i binds each listener on its port + i (a free port each when the port is 0). `--nodes` sets it."),
    ("log.dirs", "list", "./data", "Directory holding the partition logs (first one is used)."),
    ("log.dir", "string", "./data", "Used when log.dirs is not set."),
    ("num.partitions", "int", "1", "Default partition count of auto-created topics."),
    ("default.replication.factor", "int", "1", "Default replication factor (single node: 1)."),
    ("auto.create.topics.enable", "boolean", "true", "Create topics on metadata/produce requests."),
    ("delete.topic.enable", "boolean", "true", "Allow DeleteTopics."),
    ("socket.request.max.bytes", "int", "104857600", "Largest request frame accepted."),
    ("queued.max.requests", "int", "500",
     "Requests in hand across the whole broker (Kafka's request queue); each connection has at most one, "
     "read only after the previous one is answered."),
    ("max.connections", "int", "2147483647",
     "Connections the broker holds at once; past it the broker stops accepting until one closes."),
    ("max.connections.per.ip", "int", "2147483647", "Connections one IP address may hold; more are closed."),
    ("max.connections.per.ip.overrides", "string", "",
     "Per-host exceptions to max.connections.per.ip: `host:count,host:count` (IP or hostname)."),
    ("fetch.max.bytes", "int", "57671680", "Largest response a Fetch request may return; larger max_bytes is capped."),
    ("max.partitions.per.request", "int", "10000",
     "minikafka: partitions one CreateTopics or CreatePartitions request may create; beyond it every topic "
     "gets POLICY_VIOLATION (Kafka's controller hard-codes this bound: MAX_PARTITIONS_PER_BATCH = 10000)."),
    ("log.retention.check.interval.ms", "long", "300000", "How often retention runs."),
    ("log.initial.task.delay.ms", "long", "30000", "Delay before the first retention and checkpoint run."),
    ("log.flush.offset.checkpoint.interval.ms", "int", "60000", "How often offset checkpoints are written."),
    ("log.cleaner.enable", "boolean", "true", "Compact cleanup.policy=compact topics (storage/cleaner.py)."),
    ("log.cleaner.backoff.ms", "long", "15000", "How often the log cleaner looks for a log to compact."),
    ("minikafka.cleaner.crash.point", "string", None,
     "minikafka, tests only: kill the broker's own process (as kill -9) when the log cleaner reaches this "
     "step of a segment swap: after_cleaned, after_swap or after_delete. For `minikafka serve` only."),
    ("minikafka.coordinator.load.delay.ms", "long", "0",
     "minikafka, for testing clients: wait this long after the listener is up before replaying "
     "__consumer_offsets and __transaction_state, so group and transaction requests meanwhile get "
     "COORDINATOR_LOAD_IN_PROGRESS, as from a Kafka broker loading a large coordinator partition."),
    ("offsets.topic.num.partitions", "int", "50", "Partitions of __consumer_offsets."),
    ("transaction.state.log.num.partitions", "int", "50", "Partitions of __transaction_state."),
    ("transaction.max.timeout.ms", "int", "900000", "Largest transaction.timeout.ms a producer may ask for."),
    ("transaction.version", "int", "0",
     "Stands in for Kafka's finalized feature of that name (no KRaft here): 1 and 2 write TransactionLogValue v1 "
     "(flexible) to __transaction_state, 0 writes v0; 2 enables KIP-890 (EndTxn v5 epoch bumps, implicit "
     "partition adds by Produce v12 / TxnOffsetCommit v5) for clients that use those versions."),
    ("transactional.id.expiration.ms", "int", "604800000", "Idle time after which a transactional id expires."),
    ("transaction.abort.timed.out.transaction.cleanup.interval.ms", "int", "10000",
     "How often timed-out transactions are aborted."),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", "int", "3600000",
     "How often expired transactional ids are removed."),
    ("group.initial.rebalance.delay.ms", "int", "0", "Kafka's default is 3000; 0 keeps tests fast."),
    ("group.min.session.timeout.ms", "int", "6000", "Smallest session timeout a group member may ask for."),
    ("group.max.session.timeout.ms", "int", "1800000", "Largest session timeout a group member may ask for."),
    ("group.consumer.session.timeout.ms", "int", "45000",
     "Session timeout of a KIP-848 consumer group member (the broker decides it, not the client)."),
    ("group.consumer.heartbeat.interval.ms", "int", "5000", "Heartbeat interval given to KIP-848 consumer members."),
    ("group.consumer.assignors", "list", "uniform,range",
     "Server-side assignors of KIP-848 consumer groups; the first is the default."),
    ("group.consumer.migration.policy", "string", "bidirectional",
     "Online conversion of non-empty groups between the classic and the consumer protocol: disabled, "
     "upgrade (classic to consumer on a first ConsumerGroupHeartbeat), downgrade (back to classic when "
     "the last consumer-protocol member leaves) or bidirectional."),
    ("group.share.session.timeout.ms", "int", "45000",
     "Session timeout of a share group member (KIP-932): removed if it does not heartbeat within it."),
    ("group.share.heartbeat.interval.ms", "int", "5000", "Heartbeat interval given to share group members."),
    ("group.share.record.lock.duration.ms", "int", "30000",
     "How long a share group member holds the records it acquired before they are released."),
    ("group.share.delivery.count.limit", "int", "5",
     "Deliveries of a record to share group members after which it is archived instead of released."),
    ("group.share.partition.max.record.locks", "int", "2000",
     "In-flight records of one share-partition: no record past that many offsets from its start is acquired."),
    ("group.share.max.size", "int", "200", "Members a share group may have."),
    ("share.coordinator.state.topic.num.partitions", "int", "50", "Partitions of __share_group_state."),
    ("share.coordinator.snapshot.update.records.per.snapshot", "int", "500",
     "ShareUpdate records written for a share-partition before a ShareSnapshot replaces them."),
    ("offsets.retention.ms", "int", "604800000", "Offsets of an empty group expire after this long."),
    ("offsets.retention.check.interval.ms", "long", "600000", "How often expired offsets are removed."),
    ("offset.metadata.max.bytes", "int", "4096", "Largest metadata string of a committed offset."),
    ("producer.id.expiration.ms", "int", "86400000", "Idle time after which a producer id's state is dropped."),
    ("producer.id.expiration.check.interval.ms", "int", "600000", "How often expired producer ids are dropped."),
    ("connections.max.idle.ms", "long", "600000", "Idle connections are closed after this long."),
    ("quota.window.num", "int", "11",
     "Samples kept for client quotas' rates (producer_byte_rate, consumer_byte_rate, request_percentage)."),
    ("quota.window.size.seconds", "int", "1", "Time span of each sample of a client quota's rate."),
    ("controller.quota.window.num", "int", "11",
     "Samples of controller_mutation_rate: with the window size, its token bucket holds num * size * rate."),
    ("controller.quota.window.size.seconds", "int", "1", "Time span of each controller mutation quota sample."),
    ("connection.failed.authentication.delay.ms", "int", "100",
     "How long a connection whose authentication failed stays open after the error is sent, reading nothing, "
     "before it is closed."),
    ("cluster.id", "string", None, "Cluster id; generated and kept in meta.properties if unset."),
    ("shutdown.timeout.ms", "long", "10000", "minikafka: how long in-flight requests may finish on shutdown."),
    ("admin.listener.port", "int", None,
     "minikafka: port of the HTTP admin listener (faults, state; docs/control-plane.md); unset: no listener, "
     "0: a free port. `--admin-port` sets it."),
    ("minikafka.clock", "string", "system",
     "minikafka: `system` (the wall clock) or `manual`: starts at the wall time and moves only when advanced "
     "(admin API POST /clock/advance, Broker.advance_clock), running every timeout it passes. `--clock` sets it."),
    ("minikafka.kafka.version", "string", None,
     "minikafka: the Kafka release to behave as (2.8, 3.0-3.9 or 3.x, 4.0, 4.1; default the newest): ApiVersions "
     "and the versions served are cut to that release's, and its defaults apply (docs/kafka-versions.md). "
     "`--kafka-version` sets it."),
    ("schema.registry.port", "int", None,
     "minikafka: serve the Confluent Schema Registry REST API on this port (docs/schema-registry.md), state in "
     "the `_schemas` topic; unset: off, 0: a free port. `--schema-registry-port` sets it."),
    ("schema.registry.host", "string", None,
     "minikafka: address the schema registry binds; unset: the broker's host."),
    ("schema.registry.listener.name", "string", None,
     "minikafka: a listener whose security the schema registry takes: HTTPS with its key store (SSL, "
     "SASL_SSL), HTTP basic auth with its SASL users (PLAIN users and SCRAM credentials; SASL_PLAINTEXT, "
     "SASL_SSL). Unset: plain HTTP, no authentication."),
    ("admin.listener.host", "string", "127.0.0.1",
     "minikafka: address the admin listener binds; loopback unless set, as it can make the broker fail. Any "
     "other address needs admin.listener.token."),
    ("admin.listener.token", "password", None,
     "minikafka: a secret every admin request must present (`Authorization: Bearer TOKEN`, or `access_token=TOKEN` "
     "in the query for the inspector's event stream); required before the admin listener binds a non-loopback "
     "address, since whoever reaches it controls the broker (faults, clock, node stops)."),
    ("minikafka.trace.file", "string", None,
     "minikafka: write one JSON line per request/response pair here (`-`: standard output). `--trace` sets it."),
    ("minikafka.trace.records", "boolean", "false",
     "minikafka: the trace also decodes every record of produced and fetched batches. `--trace-records`."),
    ("minikafka.trace.apis", "list", "",
     "minikafka: trace only these APIs (Kafka's names, e.g. Produce,EndTxn, or SchemaRegistry); empty: all. "
     "`--trace-api`."),
    ("minikafka.trace.client.ids", "list", "", "minikafka: trace only requests from these client ids."),
    ("minikafka.trace.topics", "list", "", "minikafka: trace only requests naming one of these topics."),
    ("minikafka.trace.ring.size", "int", "1000",
     "minikafka: exchanges kept in memory for the inspector and GET /trace, traced to a file or not; 0: none."),
    ("minikafka.client.telemetry.enabled", "boolean", "false",
     "minikafka: receive client telemetry (KIP-714): serve GetTelemetrySubscriptions and PushTelemetry and show "
     "what clients push in the inspector, /metrics and the trace (docs/telemetry-and-quotas.md). Kafka serves "
     "them only with a telemetry receiver plugin configured; this is minikafka's built-in one."),
    ("telemetry.max.bytes", "int", "1048576",
     "The largest client telemetry payload accepted, compressed or decompressed (TELEMETRY_TOO_LARGE past it)."),
    ("minikafka.pcap.file", "string", None,
     "minikafka: write the raw conversation to this pcap file, framed as TCP on the real ports, for Wireshark. "
     "`--pcap` sets it."),
    # TLS of SSL and SASL_SSL listeners (broker/security/tls.py); `listener.name.<listener>.<key>` overrides each.
    ("ssl.keystore.type", "string", "PEM",
     "Format of the key store: PEM or PKCS12. Kafka's default, JKS, needs a JVM (convert it with keytool)."),
    ("ssl.keystore.location", "string", None, "Key store file; PEM: the private key and its certificate chain."),
    ("ssl.keystore.password", "password", None, "Password of a PKCS12 key store (not used with PEM)."),
    ("ssl.keystore.certificate.chain", "password", None, "The certificate chain, inline PEM (ssl.keystore.type=PEM)."),
    ("ssl.keystore.key", "password", None, "The private key, inline PEM (PKCS#8, encrypted or not)."),
    ("ssl.key.password", "password", None, "Password of the private key, when it is encrypted."),
    ("ssl.truststore.type", "string", "PEM", "Format of the trust store: PEM or PKCS12 (Kafka's default: JKS)."),
    ("ssl.truststore.location", "string", None, "Trust store file: the CA certificates that sign client certificates."),
    ("ssl.truststore.password", "password", None, "Password of a PKCS12 trust store."),
    ("ssl.truststore.certificates", "password", None, "Trusted CA certificates, inline PEM."),
    ("ssl.client.auth", "string", "none", "Client certificates: none, requested (optional) or required."),
    ("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions accepted."),
    ("ssl.protocol", "string", "TLSv1.3", "Accepted as in Kafka; ssl.enabled.protocols decides the versions."),
    ("ssl.cipher.suites", "list", "",
     "Cipher suites (Java/IANA or OpenSSL names); empty: OpenSSL's defaults. TLS 1.3 suites cannot be narrowed."),
    ("ssl.principal.mapping.rules", "string", "DEFAULT",
     "Rules mapping a client certificate's X.500 name to a user name: DEFAULT, RULE:pattern/replacement/[LU]."),
    ("ssl.endpoint.identification.algorithm", "string", "https",
     "Accepted as in Kafka; a broker's own outbound TLS only, which minikafka does not have."),
    # SASL on SASL_PLAINTEXT and SASL_SSL listeners (broker/security/sasl_server.py; docs/security.md).
    ("sasl.enabled.mechanisms", "list", None,
     "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER. Unset: PLAIN and both SCRAMs (Kafka: GSSAPI, which "
     "needs Kerberos and is not supported)."),
    ("sasl.jaas.config", "password", None,
     "JAAS login module line; `listener.name.<listener>.<mechanism>.sasl.jaas.config` as in Kafka. PLAIN "
     "users are its user_<name>=\"<password>\" options."),
    ("sasl.mechanism.inter.broker.protocol", "string", "GSSAPI", "Accepted as in Kafka; no broker-to-broker traffic."),
    # ACLs (broker/security/acls.py; docs/security.md).
    ("authorizer.class.name", "string", "",
     "Kafka's StandardAuthorizer (org.apache.kafka.metadata.authorizer.StandardAuthorizer, or the older "
     "kafka.security.authorizer.AclAuthorizer) turns ACLs on; empty: no authorizer, nothing is checked."),
    ("super.users", "list", "", "Principals allowed everything, `User:alice;User:bob`."),
    ("allow.everyone.if.no.acl.found", "boolean", "false",
     "With an authorizer: whether a resource without any ACL is open to every principal."),
    ("minikafka.scram.users", "password", None,
     "minikafka: SCRAM-SHA-256 and -512 credentials created at start for `user:password,...` (4096 "
     "iterations) where none exists, as `kafka-storage format --add-scram` does."),
)

_BOOLEAN = re.compile(r"^(true|false)$", re.IGNORECASE)


def _check_type(key: str, value: str, kind: str) -> None:
    try:
        if kind in ("int", "long"):
            int(value)
        elif kind == "double":
            float(value)
        elif kind == "boolean" and not _BOOLEAN.match(value):
            raise ValueError(value)
    except ValueError:
        raise ConfigError(f"invalid value {value!r} for configuration {key}: expected {kind}") from None


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties: `key=value` or `key: value`, `#`/`!` comments, `\\` continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in text.splitlines():
        line = raw.strip() if not pending else raw.lstrip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending += line[:-1]
            continue
        line, pending = pending + line, ""
        match = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        if match:
            props[match.group(1).replace("\\", "")] = match.group(2)
        else:
            props[line] = ""
    return props


def env_properties(environ: Mapping[str, str]) -> dict[str, str]:
    return {
        key[len(ENV_PREFIX) :].lower().replace("_", "."): value
        for key, value in environ.items()
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX)
    }


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAX_PORT = 65535


@dataclass(frozen=True, slots=True)
class Listener:
    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"

    @classmethod
    def parse(cls, text: str) -> Listener:
        match = re.match(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:]*):(\d+)$", text.strip())
        if not match:
            raise ConfigError(f"invalid listener {text!r}: expected NAME://host:port")
        host = match.group(2).strip("[]") or "0.0.0.0"
        return cls(match.group(1).upper(), host, int(match.group(3)))


def _protocol_map(value: str) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, sep, protocol = item.partition(":")
        if not sep or protocol.strip().upper() not in SECURITY_PROTOCOLS:
            raise ConfigError(f"invalid value {value!r} for configuration listener.security.protocol.map: "
                              f"expected NAME:PROTOCOL with PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}")
        protocols[name.strip().upper()] = protocol.strip().upper()
    return protocols


def _listeners(props: Mapping[str, str], listeners_value: str, protocol_map_value: str, nodes: int,
               host: str | None, port: int | None) -> tuple[tuple[Listener, ...], dict[str, Listener]]:
    """The listeners to bind, each with its security protocol, and the advertised address by listener name.

    As Kafka: names are unique, every name needs a protocol (the map's defaults cover the four standard
    names), controller listeners are left out. `--host/--port` replace the first listener's address."""
    protocols = _protocol_map(protocol_map_value)
    controller_names = {name.strip().upper() for name in props.get("controller.listener.names", "").split(",")}
    parsed = [Listener.parse(text) for text in listeners_value.split(",") if text.strip()]
    served = [listener for listener in parsed if listener.name not in controller_names]
    if not served:
        raise ConfigError("listeners names no listener for clients")
    names = [listener.name for listener in served]
    duplicate = next((name for name in names if names.count(name) > 1), None)
    if duplicate is not None:
        raise ConfigError(f"invalid value for configuration listeners: the listener name {duplicate} is used twice")
    listeners: list[Listener] = []
    for index, listener in enumerate(served):
        protocol = protocols.get(listener.name)
        if protocol is None:
            raise ConfigError(f"no security protocol defined for listener {listener.name} "
                              f"(set listener.security.protocol.map)")
        if index == 0:
            listener = Listener(listener.name, host if host is not None else listener.host,
                                port if port is not None else listener.port)
        listeners.append(Listener(listener.name, listener.host, listener.port, protocol))
    for listener in listeners:
        # --port -5 and ports past 65535 would otherwise reach bind() and end in a traceback.
        if not 0 <= listener.port <= MAX_PORT:
            raise ConfigError(f"invalid port {listener.port} for listener {listener.name}: a port from 0 to {MAX_PORT}")
        if listener.port and listener.port + nodes - 1 > MAX_PORT:
            raise ConfigError(f"listener {listener.name} on port {listener.port} with minikafka.nodes={nodes}: node i "
                              f"binds port + i, and {listener.port + nodes - 1} is past {MAX_PORT}")
    # Node i binds port + i: the ranges must not overlap, or two nodes' listeners would want one port.
    ranges = sorted((lst.port, lst.port + nodes - 1, lst.name) for lst in listeners if lst.port != 0)
    for (_, first_end, first), (second_start, _, second) in itertools.pairwise(ranges):
        if second_start <= first_end:
            raise ConfigError(f"listeners {first} and {second} are too close for minikafka.nodes={nodes}: "
                              f"node i binds port + i, so leave {nodes} ports between them (or use port 0)")
    advertised: dict[str, Listener] = {}
    for text in props.get("advertised.listeners", "").split(","):
        if text.strip():
            entry = Listener.parse(text)
            if entry.name not in names:
                raise ConfigError(f"advertised.listeners names {entry.name}, which is not in listeners")
            advertised[entry.name] = entry
    return tuple(listeners), advertised


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int = 1
    host: str = "127.0.0.1"
    port: int = 9092
    advertised_host: str | None = None
    advertised_port: int | None = None
    # Every listener to bind (the first is host:port above); empty: one PLAINTEXT listener on host:port.
    listeners: tuple[Listener, ...] = ()
    # Advertised address by listener name, where advertised.listeners gives one.
    advertised_listeners: Mapping[str, Listener] = field(default_factory=dict)
    nodes: int = 1
    data_dir: Path = Path("./data")
    num_partitions: int = 1
    auto_create_topics: bool = True
    delete_topic_enable: bool = True
    socket_request_max_bytes: int = 104857600
    queued_max_requests: int = 500
    max_connections: int = 2147483647
    max_connections_per_ip: int = 2147483647
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    fetch_max_bytes: int = 57671680
    max_partitions_per_request: int = 10000
    retention_check_interval_ms: int = 300000
    initial_task_delay_ms: int = 30000
    checkpoint_interval_ms: int = 60000
    log_cleaner_enable: bool = True
    log_cleaner_backoff_ms: int = 15000
    cleaner_crash_point: str | None = None
    coordinator_load_delay_ms: int = 0
    offsets_topic_num_partitions: int = 50
    transaction_state_log_num_partitions: int = 50
    transaction_max_timeout_ms: int = 900000
    transaction_version: int = 0
    transactional_id_expiration_ms: int = 604800000
    transaction_abort_interval_ms: int = 10000
    transaction_expire_interval_ms: int = 3600000
    group_initial_rebalance_delay_ms: int = 0
    connections_max_idle_ms: int = 600000
    failed_authentication_delay_ms: int = 100
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    controller_quota_window_num: int = 11
    controller_quota_window_size_seconds: int = 1
    producer_id_expiration_ms: int = 86400000
    producer_id_expiration_check_interval_ms: int = 600000
    shutdown_timeout_ms: int = 10000
    admin_port: int | None = None  # None: no admin listener
    admin_host: str = "127.0.0.1"
    admin_token: str | None = None
    schema_registry_port: int | None = None  # None: no schema registry
    schema_registry_host: str | None = None  # None: the broker's host
    schema_registry_listener: str | None = None  # a listener whose security the registry takes
    kafka_version: str = NEWEST_KAFKA_VERSION  # minikafka.kafka.version, a broker/config/versions.py profile
    clock: str = "system"  # or "manual" (minikafka.clock)
    trace_file: str | None = None  # "-": standard output
    trace_records: bool = False
    trace_apis: tuple[str, ...] = ()
    trace_client_ids: tuple[str, ...] = ()
    trace_topics: tuple[str, ...] = ()
    trace_ring_size: int = 1000
    pcap_file: str | None = None
    client_telemetry_enabled: bool = False
    telemetry_max_bytes: int = 1048576
    cluster_id: str | None = None
    log_defaults: LogConfig = field(default_factory=LogConfig)
    # Every property as given (after precedence), for DescribeConfigs' "static" source.
    properties: Mapping[str, str] = field(default_factory=dict)
    unknown_keys: tuple[str, ...] = ()


def served_listeners(config: BrokerConfig) -> tuple[Listener, ...]:
    """The listeners to bind; the first at host:port, which `--host/--port` and tests set directly."""
    if not config.listeners:
        return (Listener("PLAINTEXT", config.host, config.port),)
    first, *rest = config.listeners
    return (Listener(first.name, config.host, config.port, first.security_protocol), *rest)


def _is_storage_key(key: str) -> bool:
    return key in BROKER_LOG_KEYS


def _is_listener_key(key: str) -> bool:
    """`listener.name.<listener>.<key>`: a broker key set for one listener only (Kafka's listener prefix)."""
    match = re.match(r"^listener\.name\.[a-z0-9_]+\.(.+)$", key)
    if match is None:
        return False
    # A JAAS line is given per mechanism: listener.name.sasl_ssl.plain.sasl.jaas.config.
    return match.group(1) in BROKER_CONFIGS or re.match(r"^[a-z0-9-]+\.sasl\.jaas\.config$", match.group(1)) is not None


def _transaction_version(value: str) -> int:
    version = int(value)
    if version not in (0, 1, 2):
        raise ConfigError(f"invalid value {value!r} for configuration transaction.version: 0, 1 or 2")
    return version


def _at_least(minimum: int, key: str, value: str) -> int:
    number = int(value)
    if number < minimum:
        raise ConfigError(f"invalid value {value!r} for configuration {key}: value must be at least {minimum}")
    return number


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def _admin_token(token: str | None, port: str | None, host: str) -> str | None:
    """The control plane has no other protection: off loopback it needs a token, or the broker does not start."""
    token = token or None
    if port not in (None, "") and token is None and not _is_loopback(host):
        raise ConfigError(f"admin.listener.host={host} needs admin.listener.token: whoever reaches the admin "
                          "listener controls the broker (faults, clock, node stops), so it binds another address "
                          "than loopback only with a token")
    return token


def _admin_port(value: str | None, key: str = "admin.listener.port") -> int | None:
    if value is None or not value.strip():
        return None
    port = int(value)
    if not 0 <= port <= MAX_PORT:
        raise ConfigError(f"invalid value {value!r} for configuration {key}: a port from 0 to {MAX_PORT}")
    return port


def _names(value: str) -> tuple[str, ...]:
    return tuple(name for name in (part.strip() for part in value.split(",")) if name)


# The flight recorder's names for the HTTP services it records beside Kafka's APIs (its entries' "api").
HTTP_TRACE_APIS = frozenset({"SchemaRegistry"})


def _api_names(value: str) -> tuple[str, ...]:
    from minikafka.protocol.api_keys import api_key_by_name

    names = _names(value)
    for name in names:
        if api_key_by_name(name) is None and name not in HTTP_TRACE_APIS:
            raise ConfigError(f"minikafka.trace.apis: unknown Kafka API {name!r} (Kafka's names, such as Produce "
                              "or EndTxn, or SchemaRegistry)")
    return names


CLOCKS = ("system", "manual")


def _clock(value: str) -> str:
    clock = value.strip().lower()
    if clock not in CLOCKS:
        raise ConfigError(f"invalid value {value!r} for configuration minikafka.clock: one of {', '.join(CLOCKS)}")
    return clock


def _per_ip_overrides(value: str) -> dict[str, int]:
    """Kafka's `host:count,host:count`; a count is the last `:` field, so IPv6 hosts keep their colons."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        host, sep, count = item.rpartition(":")
        if not sep or not host.strip() or not count.strip().isdigit():
            raise ConfigError(
                f"invalid value {value!r} for configuration max.connections.per.ip.overrides: expected host:count")
        overrides[host.strip().strip("[]")] = int(count)
    return overrides


def build_config(
    *,
    properties_file: Path | None = None,
    environ: Mapping[str, str] | None = None,
    overrides: Iterable[str] = (),
    host: str | None = None,
    port: int | None = None,
    data_dir: Path | None = None,
    known_storage_key: Callable[[str], bool] | None = None,
) -> BrokerConfig:
    props: dict[str, str] = {}
    if properties_file is not None:
        try:
            props.update(parse_properties(properties_file.read_text()))
        except OSError as exc:
            raise ConfigError(f"cannot read {properties_file}: {exc.strerror}") from None
    props.update(env_properties(os.environ if environ is None else environ))
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid --override {item!r}: expected key=value")
        props[key.strip()] = value.strip()

    for key, value in props.items():
        if key in BROKER_CONFIGS:
            _check_type(key, value, BROKER_CONFIGS[key].type)
    try:
        kafka_version = resolve(props.get("minikafka.kafka.version", NEWEST_KAFKA_VERSION).strip())
    except UnknownKafkaVersion as exc:
        raise ConfigError(f"invalid value for configuration minikafka.kafka.version: {exc}") from None
    try:
        # The release's defaults sit under what was given; they are not "set" (DescribeConfigs shows `props`).
        log_defaults = log_config_from_broker_properties({**profile_defaults(kafka_version), **props})
    except InvalidConfig as exc:
        raise ConfigError(str(exc)) from None

    def get(key: str) -> str:
        value = props.get(key, BROKER_CONFIGS[key].default)
        assert value is not None
        return value

    nodes = _at_least(1, "minikafka.nodes", get("minikafka.nodes"))
    listeners, advertised_listeners = _listeners(props, get("listeners"), get("listener.security.protocol.map"),
                                                 nodes, host, port)
    listener = listeners[0]
    advertised_listener = advertised_listeners.get(listener.name)
    log_dirs = props.get("log.dirs") or props.get("log.dir") or BROKER_CONFIGS["log.dirs"].default or "./data"
    node_id = int(props.get("node.id", props.get("broker.id", "1")))
    is_known_storage = known_storage_key or _is_storage_key
    unknown = tuple(sorted(k for k in props
                           if k not in BROKER_CONFIGS and not is_known_storage(k) and not _is_listener_key(k)))

    if int(get("max.connections.per.ip")) == 0 and not get("max.connections.per.ip.overrides").strip():
        raise ConfigError("max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
                          "is set (as in Kafka)")

    return BrokerConfig(
        node_id=node_id,
        host=listener.host,
        port=listener.port,
        advertised_host=advertised_listener.host if advertised_listener else None,
        advertised_port=advertised_listener.port if advertised_listener else None,
        listeners=listeners,
        advertised_listeners=advertised_listeners,
        nodes=nodes,
        data_dir=data_dir if data_dir is not None else Path(log_dirs.split(",")[0]),
        num_partitions=int(get("num.partitions")),
        auto_create_topics=get("auto.create.topics.enable").lower() == "true",
        delete_topic_enable=get("delete.topic.enable").lower() == "true",
        socket_request_max_bytes=int(get("socket.request.max.bytes")),
        queued_max_requests=_at_least(1, "queued.max.requests", get("queued.max.requests")),
        max_connections=_at_least(0, "max.connections", get("max.connections")),
        max_connections_per_ip=_at_least(0, "max.connections.per.ip", get("max.connections.per.ip")),
        max_connections_per_ip_overrides=_per_ip_overrides(get("max.connections.per.ip.overrides")),
        fetch_max_bytes=_at_least(0, "fetch.max.bytes", get("fetch.max.bytes")),
        max_partitions_per_request=_at_least(1, "max.partitions.per.request", get("max.partitions.per.request")),
        retention_check_interval_ms=int(get("log.retention.check.interval.ms")),
        initial_task_delay_ms=int(get("log.initial.task.delay.ms")),
        checkpoint_interval_ms=int(get("log.flush.offset.checkpoint.interval.ms")),
        log_cleaner_enable=get("log.cleaner.enable").lower() == "true",
        log_cleaner_backoff_ms=_at_least(1, "log.cleaner.backoff.ms", get("log.cleaner.backoff.ms")),
        cleaner_crash_point=props.get("minikafka.cleaner.crash.point") or None,
        coordinator_load_delay_ms=_at_least(0, "minikafka.coordinator.load.delay.ms",
                                            get("minikafka.coordinator.load.delay.ms")),
        offsets_topic_num_partitions=int(get("offsets.topic.num.partitions")),
        transaction_state_log_num_partitions=int(get("transaction.state.log.num.partitions")),
        transaction_max_timeout_ms=int(get("transaction.max.timeout.ms")),
        transaction_version=_transaction_version(get("transaction.version")),
        transactional_id_expiration_ms=int(get("transactional.id.expiration.ms")),
        transaction_abort_interval_ms=int(get("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
        transaction_expire_interval_ms=int(get("transaction.remove.expired.transaction.cleanup.interval.ms")),
        group_initial_rebalance_delay_ms=int(get("group.initial.rebalance.delay.ms")),
        connections_max_idle_ms=int(get("connections.max.idle.ms")),
        failed_authentication_delay_ms=_at_least(0, "connection.failed.authentication.delay.ms",
                                                 get("connection.failed.authentication.delay.ms")),
        quota_window_num=_at_least(1, "quota.window.num", get("quota.window.num")),
        quota_window_size_seconds=_at_least(1, "quota.window.size.seconds", get("quota.window.size.seconds")),
        controller_quota_window_num=_at_least(1, "controller.quota.window.num", get("controller.quota.window.num")),
        controller_quota_window_size_seconds=_at_least(1, "controller.quota.window.size.seconds",
                                                       get("controller.quota.window.size.seconds")),
        producer_id_expiration_ms=int(get("producer.id.expiration.ms")),
        producer_id_expiration_check_interval_ms=int(get("producer.id.expiration.check.interval.ms")),
        shutdown_timeout_ms=int(get("shutdown.timeout.ms")),
        admin_port=_admin_port(props.get("admin.listener.port")),
        admin_host=get("admin.listener.host"),
        admin_token=_admin_token(props.get("admin.listener.token"), props.get("admin.listener.port"),
                                 get("admin.listener.host")),
        schema_registry_port=_admin_port(props.get("schema.registry.port"), "schema.registry.port"),
        schema_registry_host=props.get("schema.registry.host") or None,
        schema_registry_listener=(props.get("schema.registry.listener.name") or "").strip().upper() or None,
        kafka_version=kafka_version,
        clock=_clock(get("minikafka.clock")),
        trace_file=props.get("minikafka.trace.file") or None,
        trace_records=get("minikafka.trace.records").lower() == "true",
        trace_apis=_api_names(get("minikafka.trace.apis")),
        trace_client_ids=_names(get("minikafka.trace.client.ids")),
        trace_topics=_names(get("minikafka.trace.topics")),
        trace_ring_size=_at_least(0, "minikafka.trace.ring.size", get("minikafka.trace.ring.size")),
        pcap_file=props.get("minikafka.pcap.file") or None,
        client_telemetry_enabled=get("minikafka.client.telemetry.enabled").lower() == "true",
        telemetry_max_bytes=_at_least(1, "telemetry.max.bytes", get("telemetry.max.bytes")),
        cluster_id=props.get("cluster.id"),
        log_defaults=log_defaults,
        properties=dict(props),
        unknown_keys=unknown,
    )
