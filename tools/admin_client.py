"""A small blocking Kafka admin client for the command-line tools (`minikafka transactions`,
`minikafka consumer-groups`), speaking the wire protocol so the tools work against any Kafka broker.

Per connection it sends ApiVersions first and then uses, for every API, the highest version that
both the broker and this client support. Requests go where Kafka's admin client sends them: the
group or transaction coordinator (FindCoordinator), the partition leader (Metadata), or every broker
(ListGroups, ListTransactions). Every socket operation is bounded by the client's deadline.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from minikafka.protocol.api_keys import ApiKey, api_name, kio_range
from minikafka.protocol.build import build
from minikafka.protocol.codec import decode_response, encode_request, request_schema
from minikafka.protocol.errors import ErrorCode

CLIENT_ID = "minikafka-admin"
DEFAULT_TIMEOUT_S = 30.0
MAX_FRAME_BYTES = 100 * 1024 * 1024
RETRY_BACKOFF_S = 0.1
API_VERSIONS_REQUEST_VERSION = 3
UNSUPPORTED_VERSION = 35
COORDINATOR_KEY_GROUP = 0
COORDINATOR_KEY_TRANSACTION = 1
# Highest versions whose request shape this client fills in. OffsetFetch/OffsetCommit v10 name
# topics by id only (KIP-848); the name-based versions stay supported by every Kafka 4.x broker.
VERSION_CAPS: dict[int, int] = {ApiKey.OFFSET_FETCH: 9, ApiKey.OFFSET_COMMIT: 9}
_RETRIABLE_COORDINATOR_ERRORS = frozenset({ErrorCode.coordinator_not_available,
                                           ErrorCode.coordinator_load_in_progress, ErrorCode.not_coordinator})


def error_name(code: ErrorCode | int) -> str:
    """Kafka's name for an error code (its `Errors` enum constant)."""
    return ErrorCode(int(code)).name.upper()


class AdminError(Exception):
    """A broker answered with an error code, or the cluster could not serve the request."""

    def __init__(self, message: str, code: ErrorCode | None = None) -> None:
        super().__init__(message)
        self.code = code


class BrokerUnreachable(AdminError):
    """No connection could be made, or a connection failed mid-request."""


def check(code: ErrorCode | int, what: str) -> None:
    if int(code) != 0:
        raise AdminError(f"{what}: {error_name(code)}", ErrorCode(int(code)))


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int


@dataclass(slots=True)
class ClusterMetadata:
    brokers: dict[int, Node]
    # topic -> partition -> (leader id, replica ids)
    partitions: dict[str, dict[int, tuple[int, tuple[int, ...]]]] = field(default_factory=dict)
    internal: set[str] = field(default_factory=set)
    topic_errors: dict[str, ErrorCode] = field(default_factory=dict)


class Connection:
    """One socket to one broker, with the API versions it advertised."""

    def __init__(self, host: str, port: int, deadline: float) -> None:
        self.host, self.port = host, port
        self._deadline = deadline
        self._correlation = 0
        try:
            self._sock = socket.create_connection((host, port), timeout=self._remaining())
        except OSError as exc:
            raise BrokerUnreachable(f"cannot connect to {host}:{port}: {exc.strerror or exc}") from None
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()

    def _remaining(self) -> float:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            raise BrokerUnreachable(f"timed out talking to {self.host}:{self.port}")
        return remaining

    def _negotiate(self) -> None:
        body = self._exchange(ApiKey.API_VERSIONS, API_VERSIONS_REQUEST_VERSION,
                              client_software_name="minikafka-tools", client_software_version="1")
        if body.error_code == UNSUPPORTED_VERSION:  # the broker answered at v0 with its own range
            body = self._exchange(ApiKey.API_VERSIONS, 0)
        check(body.error_code, "ApiVersions")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in body.api_keys}

    def version_for(self, api_key: int) -> int:
        if api_key not in self.versions:
            raise AdminError(f"the broker at {self.host}:{self.port} does not support {api_name(api_key)}",
                             ErrorCode.unsupported_version)
        broker_min, broker_max = self.versions[api_key]
        ours = kio_range(api_key)
        version = min(broker_max, ours.max, VERSION_CAPS.get(api_key, ours.max))
        if version < max(broker_min, ours.min):
            raise AdminError(f"no common version of {api_name(api_key)} with {self.host}:{self.port} "
                             f"(broker {broker_min}-{broker_max})", ErrorCode.unsupported_version)
        return version

    def request(self, api_key: int, **fields: Any) -> Any:
        """Send one request at the negotiated version and return the decoded response body."""
        version = self.version_for(api_key)
        return self._exchange(api_key, version, **fields)

    def request_versioned(self, api_key: int, **fields: Any) -> tuple[int, Any]:
        version = self.version_for(api_key)
        return version, self._exchange(api_key, version, **fields)

    def _exchange(self, api_key: int, version: int, **fields: Any) -> Any:
        self._correlation += 1
        body: Any = build(request_schema(api_key, version), **fields)
        try:
            self._sock.settimeout(self._remaining())
            self._sock.sendall(encode_request(self._correlation, body, CLIENT_ID))
            (size,) = struct.unpack(">i", self._read(4))
            if size <= 0 or size > MAX_FRAME_BYTES:
                raise BrokerUnreachable(f"bad frame size {size} from {self.host}:{self.port}")
            frame = self._read(size)
        except TimeoutError:
            raise BrokerUnreachable(f"timed out waiting for {self.host}:{self.port}") from None
        except OSError as exc:
            raise BrokerUnreachable(f"connection to {self.host}:{self.port} failed: {exc.strerror or exc}") from None
        correlation, response = decode_response(frame, api_key, version)
        if correlation != self._correlation:
            raise BrokerUnreachable(f"correlation id {correlation} from {self.host}:{self.port}, "
                                    f"expected {self._correlation}")
        return response

    def _read(self, count: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < count:
            chunk = self._sock.recv(count - len(chunks))
            if not chunk:
                raise BrokerUnreachable(f"{self.host}:{self.port} closed the connection")
            chunks += chunk
        return bytes(chunks)

    def close(self) -> None:
        self._sock.close()


def parse_bootstrap(servers: str) -> list[tuple[str, int]]:
    parsed = []
    for entry in servers.split(","):
        host, sep, port = entry.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise AdminError(f"invalid bootstrap server {entry.strip()!r}: expected host:port")
        # The socket module would wrap 99999 round to 34463 and connect there.
        if not 1 <= int(port) <= 65535:
            raise AdminError(f"invalid bootstrap server {entry.strip()!r}: the port must be from 1 to 65535")
        parsed.append((host.strip("[]"), int(port)))
    return parsed


class AdminClient:
    """Connections by node id, opened lazily; `close` ends them all."""

    def __init__(self, bootstrap_servers: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self._bootstrap = parse_bootstrap(bootstrap_servers)
        self.deadline = time.monotonic() + timeout_s
        self._by_address: dict[tuple[str, int], Connection] = {}
        self._metadata: ClusterMetadata | None = None

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        for connection in self._by_address.values():
            connection.close()
        self._by_address.clear()

    def _connect(self, host: str, port: int) -> Connection:
        connection = self._by_address.get((host, port))
        if connection is None:
            connection = self._by_address[(host, port)] = Connection(host, port, self.deadline)
        return connection

    def any_broker(self) -> Connection:
        if self._by_address:
            return next(iter(self._by_address.values()))
        failures = []
        for host, port in self._bootstrap:
            try:
                return self._connect(host, port)
            except BrokerUnreachable as exc:
                failures.append(str(exc))
        raise BrokerUnreachable("; ".join(failures))

    def node(self, node_id: int) -> Connection:
        brokers = self.metadata().brokers
        if node_id not in brokers:
            raise AdminError(f"broker {node_id} is not in the cluster metadata", ErrorCode.broker_not_available)
        found = brokers[node_id]
        return self._connect(found.host, found.port)

    # --- metadata -------------------------------------------------------------------------

    def metadata(self, topics: Iterable[str] | None = None, *, refresh: bool = False) -> ClusterMetadata:
        """All topics (cached) or the named ones (always asked)."""
        if topics is None and self._metadata is not None and not refresh:
            return self._metadata
        connection = self.any_broker()
        version = connection.version_for(ApiKey.METADATA)
        if topics is None:
            wanted: list[dict[str, Any]] | None = [] if version == 0 else None
        else:
            wanted = [{"name": name} for name in topics]
        body = connection.request(ApiKey.METADATA, topics=wanted, allow_auto_topic_creation=False)
        if hasattr(body, "error_code"):
            check(body.error_code, "Metadata")
        result = ClusterMetadata({b.node_id: Node(b.node_id, b.host, b.port) for b in body.brokers})
        for topic in body.topics:
            if topic.error_code != 0:
                result.topic_errors[topic.name] = ErrorCode(int(topic.error_code))
                continue
            result.partitions[topic.name] = {p.partition_index: (p.leader_id, tuple(p.replica_nodes))
                                             for p in topic.partitions}
            if getattr(topic, "is_internal", False):
                result.internal.add(topic.name)
        if topics is None:
            self._metadata = result
        return result

    def leader(self, topic: str, partition: int) -> Connection:
        meta = self.metadata([topic])
        if topic in meta.topic_errors:
            raise AdminError(f"topic {topic}: {error_name(meta.topic_errors[topic])}", meta.topic_errors[topic])
        partitions = meta.partitions.get(topic, {})
        if partition not in partitions:
            raise AdminError(f"{topic}-{partition}: UNKNOWN_TOPIC_OR_PARTITION", ErrorCode.unknown_topic_or_partition)
        leader_id = partitions[partition][0]
        if leader_id < 0:
            raise AdminError(f"{topic}-{partition}: LEADER_NOT_AVAILABLE", ErrorCode.leader_not_available)
        found = meta.brokers[leader_id]
        return self._connect(found.host, found.port)

    def all_brokers(self) -> dict[int, Connection]:
        return {node_id: self._connect(n.host, n.port) for node_id, n in self.metadata(refresh=True).brokers.items()}

    # --- coordinators ---------------------------------------------------------------------

    def coordinator(self, key: str, key_type: int) -> tuple[Node, Connection]:
        """FindCoordinator, retried while the coordinator is loading or moving, until the deadline."""
        while True:
            connection = self.any_broker()
            version = connection.version_for(ApiKey.FIND_COORDINATOR)
            if version >= 4:
                body = connection.request(ApiKey.FIND_COORDINATOR, key_type=key_type, coordinator_keys=[key])
                answer = body.coordinators[0]
            else:
                answer = connection.request(ApiKey.FIND_COORDINATOR, key_type=key_type, key=key)
            code = ErrorCode(int(answer.error_code))
            if code == ErrorCode.none:
                node = Node(answer.node_id, answer.host, answer.port)
                return node, self._connect(node.host, node.port)
            if code not in _RETRIABLE_COORDINATOR_ERRORS or time.monotonic() + RETRY_BACKOFF_S > self.deadline:
                raise AdminError(f"FindCoordinator for {key!r}: {error_name(code)}", code)
            time.sleep(RETRY_BACKOFF_S)  # the coordinator is loading: Kafka's client backs off too

    # --- offsets --------------------------------------------------------------------------

    def list_offsets(self, partitions: Iterable[tuple[str, int]], timestamp: int) -> dict[tuple[str, int], int]:
        """Offsets by timestamp (-1 latest, -2 earliest) from each partition's leader; -1 when none."""
        by_leader: dict[tuple[str, int], list[tuple[str, int]]] = {}
        for topic, partition in partitions:
            connection = self.leader(topic, partition)
            by_leader.setdefault((connection.host, connection.port), []).append((topic, partition))
        found: dict[tuple[str, int], int] = {}
        for address, tps in by_leader.items():
            topics: dict[str, list[dict[str, int]]] = {}
            for topic, partition in tps:
                topics.setdefault(topic, []).append({"partition_index": partition, "timestamp": timestamp,
                                                     "current_leader_epoch": -1})
            body = self._by_address[address].request(
                ApiKey.LIST_OFFSETS, replica_id=-1, isolation_level=0, timeout=int(self._remaining_ms()),
                topics=[{"name": name, "partitions": parts} for name, parts in topics.items()])
            for topic in body.topics:
                for p in topic.partitions:
                    check(p.error_code, f"ListOffsets {topic.name}-{p.partition_index}")
                    found[(topic.name, p.partition_index)] = p.offset
        return found

    def _remaining_ms(self) -> float:
        return max(1.0, (self.deadline - time.monotonic()) * 1000)
