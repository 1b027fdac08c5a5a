"""The optional admin listener: a small JSON API over HTTP/1.1 for tests in any language.

    GET    /health          {"status": "ok"}
    GET    /faults          {"faults": [rule, ...]}
    POST   /faults          body: one rule (broker/control/faults.py) -> 201 {"fault": rule}
    DELETE /faults          {"removed": N}
    GET    /faults/{id}     {"fault": rule}, or 404
    DELETE /faults/{id}     {"removed": 1}, or 404
    GET    /state           topics, partitions, producers, transactions and groups, classic and KIP-848
                            consumer groups, share groups, and the client instances pushing telemetry (KIP-714) with
                            their metrics and the broker's view of their connections (state_snapshot below)
    GET    /state/wait?topic=T&partition=P&lso=N&timeout_ms=MS
                            200 {"partition": ...} once P's last stable offset is >= N; 408 with the
                            partition as it was when timeout_ms (default 10000, at most 60000) passed
    GET    /clock           {"clock": "system"|"manual", "now_ms": N, "advanced_ms": N|null}
    GET    /schema-registry the schema registry's subjects, versions, levels, request counts and newest requests
    POST   /schema-registry/reset
                            forget every subject, schema, config and mode (ids go on growing); 404 when the
                            broker serves no registry
    POST   /clock/advance   body {"ms": N}: move a manual clock, running every timeout it passes; 409 on
                            the system clock
    GET    /crash-points    {"armed": [...], "available": [...]}
    POST   /crash-points    body {"point": NAME}: the broker process dies as kill -9 would when a
                            transaction ending passes NAME (broker/control/crash_points.py) -> 201
    DELETE /crash-points    {"removed": N}
    DELETE /topics/{name}   {"deleted": name}: the topic gone as DeleteTopics removes it (a test's clean-up of its
                            own topic); 404 when there is none, 409 for an internal topic
    POST   /reset           every topic, group, transaction, ACL, dynamic config, fault rule, crash point and
                            recorded exchange gone, as on a first start, without a restart (BrokerServer.reset)
                            -> 200 {"removed": {"topics": N, "groups": N, "transactional_ids": N}, "took_ms": T}
    GET    /metrics         Prometheus text format 0.0.4 (broker/observe/prometheus.py lists the metrics)
    GET    /trace?limit=N&api=A&client_id=C&topic=T
                            {"exchanges": [...]}: the flight recorder's newest request/response pairs,
                            oldest first (broker/observe/recorder.py); 409 when the recorder is off
    GET    /trace/stream?api=A&client_id=C&topic=T
                            server-sent events, one `data: {exchange}` per pair from now on, until the
                            client goes or the broker stops (broker/observe/trace_http.py)
    GET    / or /inspector  the web inspector (broker/control/inspector.py): an HTML page over /state and the trace

Off unless `admin.listener.port` (`--admin-port`) is set; binds 127.0.0.1 unless
`admin.listener.host` says otherwise, since anyone who reaches it can make the broker fail.
One request per connection (`Connection: close`), plain asyncio streams, no dependency. Bad input
is answered 4xx with {"error": "..."}; the request head and body are bounded, as are the time a
request may take to arrive and the connections held at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import urllib.parse
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.broker.control.crash_points import CrashPointError, crash_points_of
from minikafka.broker.control.faults import FaultSpecError, fault_table
from minikafka.broker.control.inspector import ASSET_HEADERS, ASSETS, Asset
from minikafka.broker.observe.client_telemetry import clients_state
from minikafka.coordinator.group.records import CONSUMER_PROTOCOL_TYPE, consumer_subscription_topics
from minikafka.coordinator.transaction.crash_points import CRASH_POINTS
from minikafka.protocol.errors import CorruptRecord
from minikafka.protocol.primitives import Reader
from minikafka.protocol.records import NO_PRODUCER_ID
from minikafka.storage.clock import ManualClock

if TYPE_CHECKING:
    from minikafka.broker.observe.recorder import FlightRecorder
    from minikafka.broker.wire.services import BrokerServices
    from minikafka.coordinator.group.admin import GroupDescription, MemberDescription
    from minikafka.coordinator.group.coordinator import GroupCoordinator

_log = structlog.get_logger("minikafka.admin")

MAX_HEAD_BYTES = 16 * 1024
MAX_BODY_BYTES = 64 * 1024
REQUEST_TIMEOUT_S = 10.0
# /state/wait: how long a wait may be asked for, and how often the partition is looked at meanwhile.
DEFAULT_WAIT_MS = 10_000
MAX_WAIT_MS = 60_000
_WAIT_POLL_S = 0.005
# Largest single clock advance: a year, far past every Kafka default timeout.
MAX_ADVANCE_MS = 366 * 24 * 3600 * 1000
MAX_CONNECTIONS = 32
_DISCARD_S = 1.0
_DISCARD_BYTES = 1024 * 1024
_REASONS = {
    200: "OK", 201: "Created", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 409: "Conflict", 411: "Length Required", 413: "Content Too Large",
    431: "Request Header Fields Too Large", 500: "Internal Server Error", 503: "Service Unavailable",
}


class HttpError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def delete_topic(services: BrokerServices, name: str) -> str:
    """The control plane's DeleteTopics for one topic, past ACLs and delete.topic.enable (it is the test's
    own clean-up); internal topics are refused."""
    meta = services.logs.topic(name)
    if meta is None:
        raise HttpError(404, f"no topic {name[:249]!r}")
    if meta.internal:
        raise HttpError(409, f"{name} is an internal topic")
    services.delete_topic(name)
    _log.info("deleted topic", topic=name, by="control plane")
    return name


def _partition_state(log: Any) -> dict[str, Any]:
    return {
        "log_start_offset": log.log_start_offset,
        "high_watermark": log.high_watermark,
        "last_stable_offset": log.last_stable_offset,
        "log_end_offset": log.log_end_offset,
        "segments": len(log.segments),
        "producers": [
            {"producer_id": entry.producer_id, "epoch": entry.epoch, "last_sequence": entry.last_seq,
             "open_transaction_first_offset":
                 entry.current_txn_first_offset if entry.current_txn_first_offset >= 0 else None}
            for entry in sorted(log.producer_state.entries.values(), key=lambda e: e.producer_id)
        ],
    }


def _transactions_state(services: BrokerServices) -> dict[str, dict[str, Any]]:
    """The transaction coordinator's view of every transactional id (what DescribeTransactions says), keyed
    by it as topics and groups are by name, with the age of an open transaction on the broker's clock. A
    producer id's epochs below the current one are fenced: InitProducerId bumped past them, so the
    coordinator refuses them."""
    now = services.clock.now_ms()
    transactions = {}
    built = services.transaction_coordinator.built  # the snapshot builds nothing: none built, no transactional id
    for meta in sorted(built.list(None, None) if built is not None else [], key=lambda meta: meta.transactional_id):
        is_open = meta.is_open
        started = meta.txn_start_timestamp if meta.txn_start_timestamp >= 0 else None
        transactions[meta.transactional_id] = {
            "transactional_id": meta.transactional_id, "state": meta.state.display_name, "open": is_open,
            "pending_state": meta.pending_state.display_name if meta.pending_state is not None else None,
            "producer_id": meta.producer_id, "producer_epoch": meta.producer_epoch,
            "fenced_below_epoch": meta.producer_epoch,
            "previous_producer_id": meta.last_producer_id if meta.last_producer_id != NO_PRODUCER_ID else None,
            "previous_producer_epoch": meta.last_producer_epoch if meta.last_producer_id != NO_PRODUCER_ID else None,
            "timeout_ms": meta.txn_timeout_ms,
            "partitions": [{"topic": topic, "partition": partition}
                           for topic, partition in sorted(meta.topic_partitions)],
            "start_time_ms": started,
            "last_update_time_ms": meta.txn_last_update_timestamp if meta.txn_last_update_timestamp >= 0 else None,
            "age_ms": now - started if is_open and started is not None else None,
        }
    return transactions


def consumer_assignment(assignment: bytes) -> dict[str, list[int]] | None:
    """A ConsumerProtocolAssignment (version int16, [topic string, [partition int32]], user data bytes) as
    {topic: partitions}; None when it is not one (another protocol type, or bytes that do not parse)."""
    reader = Reader(assignment, what="consumer assignment")
    try:
        if reader.int16() < 0:
            return None
        count = reader.array_length()
        if count < 0 or count > len(assignment):
            return None
        topics = {}
        for _ in range(count):
            topic = reader.string()
            partitions = reader.array_length()
            if partitions < 0 or partitions * 4 > reader.remaining:
                return None
            topics[topic] = [reader.int32() for _ in range(partitions)]
        return topics
    except CorruptRecord:
        return None


def _member_state(member: MemberDescription, protocol_type: str | None, protocol: str | None) -> dict[str, Any]:
    state: dict[str, Any] = {"member_id": member.member_id, "group_instance_id": member.group_instance_id,
                             "client_id": member.client_id, "client_host": member.client_host}
    if protocol_type == CONSUMER_PROTOCOL_TYPE:
        # Before the group has chosen a protocol, every one a member offers carries its subscription.
        offered = dict(member.protocols)
        metadata = offered.get(protocol, b"") if protocol else next(iter(offered.values()), b"")
        state["subscription"] = consumer_subscription_topics(metadata) if metadata else []
        state["assignment"] = consumer_assignment(member.latest_assignment) if member.latest_assignment else {}
    return state


def _lag(logs: Any, committed: dict[str, dict[str, int]]) -> dict[str, dict[str, int | None]]:
    """High watermark minus committed offset per partition, as kafka-consumer-groups.sh reports it;
    None for a partition that is gone or an offset that is not one."""
    lag: dict[str, dict[str, int | None]] = {}
    for topic, partitions in committed.items():
        for partition, offset in partitions.items():
            log = logs.partition(topic, int(partition))
            lag.setdefault(topic, {})[partition] = (
                max(log.high_watermark - offset, 0) if log is not None and offset >= 0 else None)
    return lag


def state_snapshot(services: BrokerServices) -> dict[str, Any]:
    """What the broker holds, as JSON: user topics with their partitions' offsets and producers, the
    transactional ids, and the groups with their generation, members (with the consumer protocol's
    subscription and assignment decoded), committed offsets and lag. Internal topics are left out."""
    logs = services.logs
    topics: dict[str, Any] = {}
    for meta in sorted(logs.topics(), key=lambda meta: meta.name):
        if meta.internal:
            continue
        partitions: dict[str, Any] = {}
        for index in range(meta.partitions):
            log = logs.partition(meta.name, index)
            if log is None:
                continue
            partitions[str(index)] = _partition_state(log)
        topics[meta.name] = {"topic_id": str(meta.topic_id), "partitions": partitions}
    groups: dict[str, Any] = {}
    coordinator = services.group_coordinator.built  # looked at, not built: none built, no group exists
    if coordinator is not None:
        for listing in sorted(coordinator.list_groups(with_offsets_only=True),
                              key=lambda listing: listing.group_id):
            described = coordinator.describe_group(listing.group_id)
            groups[listing.group_id] = _classic_group_state(coordinator, logs, described)
        for group_id in sorted(coordinator.consumer_groups):
            consumer_group = coordinator.consumer_group(group_id)
            if consumer_group is not None:
                groups.setdefault(group_id, {"committed": {}, "lag": {}}).update(
                    _consumer_group_state(coordinator, consumer_group))
    snapshot = {"topics": topics, "transactions": _transactions_state(services), "groups": groups,
                "clients": clients_state(services), "share_groups": share_groups_state(services)}
    if services.schema_registry is not None:
        snapshot["schema_registry"] = services.schema_registry.snapshot()
    return snapshot


def share_groups_state(services: BrokerServices) -> dict[str, Any]:
    """Share groups (KIP-932): epochs, members with their assignment and session deadline (broker clock),
    and each share-partition's start offset, records in flight and under lock, and lag."""
    shares = services.share_coordinator.built  # looked at, not built: none built, no share group exists
    out: dict[str, Any] = {}
    if shares is None:
        return out
    for group_id, group in sorted(shares.groups.items()):
        partitions: dict[str, dict[str, Any]] = {}
        for view in shares.views(group_id):
            partitions.setdefault(view.topic, {})[str(view.partition)] = {
                "start_offset": view.start_offset, "end_offset": view.end_offset, "in_flight": view.in_flight,
                "acquired": view.acquired, "lag": view.lag}
        out[group_id] = {
            "state": group.state, "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "members": [{"member_id": m.member_id, "client_id": m.client_id, "client_host": m.client_host,
                         "member_epoch": m.member_epoch, "subscribed_topics": list(m.subscribed_topic_names),
                         "assigned": {t: sorted(p) for t, p in sorted(m.assigned.items())},
                         "session_deadline_ms": shares.session_deadline(group_id, m.member_id)}
                        for m in group.members.values()],
            "partitions": partitions,
        }
    return out


def _classic_group_state(coordinator: GroupCoordinator, logs: Any, described: GroupDescription) -> dict[str, Any]:
    """A group as DescribeGroups and OffsetFetch tell it; a group known only by its committed offsets
    (or a consumer group's offsets) is Empty."""
    group = described if described.exists else None
    committed: dict[str, dict[str, int]] = {}
    for (topic, partition), fetched in sorted(coordinator.fetch_offsets(described.group_id, None).items()):
        committed.setdefault(topic, {})[str(partition)] = fetched.offset
    protocol_type = (group.protocol_type or None) if group is not None else None
    return {
        "state": group.state if group is not None else "Empty",
        "generation": group.generation_id if group is not None else 0,
        "protocol_type": protocol_type,
        "protocol": group.chosen_protocol if group is not None else None,
        "leader": group.leader_id if group is not None else None,
        "members": [] if group is None else [
            _member_state(member, protocol_type, group.chosen_protocol) for member in group.members
        ],
        "committed": committed,
        "lag": _lag(logs, committed),
    }


def _consumer_group_state(coordinator: GroupCoordinator, group: Any) -> dict[str, Any]:
    """A KIP-848 consumer group: epochs, and each member's epoch, partitions and session deadline (on
    the broker's clock, so tests under the manual clock know how far to move it)."""
    def partitions(assignment: dict[str, frozenset[int]]) -> dict[str, list[int]]:
        return {topic: sorted(parts) for topic, parts in sorted(assignment.items())}

    return {
        "type": "consumer",
        "state": group.state().value,
        "protocol_type": "consumer",
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "client_id": m.client_id,
                "member_epoch": m.member_epoch,
                "state": m.state.value,
                "left_static": m.left_static,
                "subscribed_topics": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assigned": partitions(m.assigned),
                "pending_revocation": partitions(m.pending_revocation),
                "target": partitions(group.target.get(m.member_id, {})),
                "session_deadline_ms": coordinator.consumer_session_deadline(group.group_id, m.member_id),
            }
            for m in group.members.values()
        ],
    }


def clock_snapshot(services: BrokerServices) -> dict[str, Any]:
    clock = services.clock
    manual = isinstance(clock, ManualClock)
    return {"clock": "manual" if manual else "system", "now_ms": clock.now_ms(),
            "advanced_ms": clock.advanced_ms if isinstance(clock, ManualClock) else None}


def advance_clock(services: BrokerServices, ms: object) -> dict[str, Any]:
    """Move a manual clock by `ms`, running what becomes due; HttpError for a bad amount or clock."""
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_ADVANCE_MS:
        raise HttpError(400, f"ms: expected an integer from 0 to {MAX_ADVANCE_MS}, got {ms!r}")
    clock = services.clock
    if not isinstance(clock, ManualClock):
        raise HttpError(409, "the broker runs on the system clock; start it with --clock manual "
                             "(minikafka.clock=manual) to advance time")
    clock.advance(ms)
    _log.info("clock advanced", ms=ms, now_ms=clock.now_ms())
    return clock_snapshot(services)


def partition_snapshot(services: BrokerServices, topic: str, partition: int) -> dict[str, Any] | None:
    log = services.logs.partition(topic, partition)
    return None if log is None else _partition_state(log)


def _json_body(body: bytes) -> dict[str, Any]:
    try:
        parsed = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise HttpError(400, f"body is not JSON: {exc}") from None
    if not isinstance(parsed, dict):
        raise HttpError(400, "body: expected a JSON object")
    return parsed


def _query_int(query: dict[str, list[str]], key: str, default: int | None = None) -> int:
    values = query.get(key)
    if not values:
        if default is None:
            raise HttpError(400, f"query parameter {key} is required")
        return default
    if not values[0].lstrip("-").isdigit():
        raise HttpError(400, f"query parameter {key}: expected an integer, got {values[0][:20]!r}")
    return int(values[0])


async def _discard_unread(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """After answering a request that was not read to its end: closing with unread bytes would reset the
    connection, and a reset can destroy the answer before the client reads it. So the sending side is
    shut and what the client still sends is read and dropped, for a bounded time and size."""
    if not writer.can_write_eof():
        return
    writer.write_eof()
    with contextlib.suppress(TimeoutError, ConnectionError):
        async with asyncio.timeout(_DISCARD_S):
            for _ in range(_DISCARD_BYTES // MAX_HEAD_BYTES):
                if not await reader.read(MAX_HEAD_BYTES):
                    break


class AdminListener:
    def __init__(self, services: BrokerServices, host: str, port: int, token: str | None = None) -> None:
        self.services = services
        self.host = host
        # admin.listener.token: every request but the inspector's static page must present it.
        self._token = token
        self.requested_port = port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._connections = 0
        self._trace_streams: set[Any] = set()  # the TraceSubscriptions of open GET /trace/stream

    async def start(self) -> int:
        self._server = await asyncio.start_server(self._serve, self.host, self.requested_port,
                                                  limit=MAX_HEAD_BYTES)
        self.port = self._server.sockets[0].getsockname()[1]
        _log.info("admin listener ready", host=self.host, port=self.port)
        return self.port

    def abort(self) -> None:
        """Stop listening at once (a crash); open admin connections end with the loop."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        for subscription in tuple(self._trace_streams):
            subscription.close()  # ends its stream, which closes its connection
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._connections += 1
        try:
            if self._connections > MAX_CONNECTIONS:
                status, body = 503, {"error": f"more than {MAX_CONNECTIONS} admin connections"}
            else:
                try:
                    try:
                        async with asyncio.timeout(REQUEST_TIMEOUT_S):
                            method, target, headers, body_bytes = await self._read_request(reader)
                    except TimeoutError:
                        raise HttpError(408, f"no complete request within {REQUEST_TIMEOUT_S:g}s") from None
                    self._authorize(target, headers)
                    if target.partition("?")[0].rstrip("/") == "/trace/stream":
                        await self._stream_trace(method, target, reader, writer)
                        return
                    # Outside the read timeout: /state/wait holds the request as long as it was asked to.
                    status, body = await self._respond(method, target, body_bytes)
                except HttpError as exc:
                    status, body = exc.status, {"error": str(exc)}
                except (ConnectionError, asyncio.IncompleteReadError):
                    return  # the client went away mid-request
                except Exception:  # a bug here must not take the broker down; the client gets a 500
                    _log.exception("admin request failed")
                    status, body = 500, {"error": "internal error; see the broker log"}
            if isinstance(body, Asset):
                content_type, payload = body.content_type, body.body
                extra = "".join(f"{name}: {value}\r\n" for name, value in ASSET_HEADERS)
            else:
                content_type, payload, extra = "application/json", json.dumps(body).encode(), ""
            writer.write(f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\n"
                         f"Content-Type: {content_type}\r\nContent-Length: {len(payload)}\r\n{extra}"
                         "Connection: close\r\n\r\n".encode() + payload)
            await writer.drain()
            if status >= 400:
                await _discard_unread(reader, writer)
        except ConnectionError:
            pass
        finally:
            self._connections -= 1
            writer.close()

    def _authorize(self, target: str, headers: Mapping[str, str]) -> None:
        """RFC 6750's two ways: the Authorization header, or access_token in the query (EventSource, which the
        inspector's live trace uses, cannot send headers). The inspector's page itself holds no data."""
        if self._token is None or target.partition("?")[0].rstrip("/") in ASSETS:
            return
        scheme, _, presented = headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            presented = urllib.parse.parse_qs(target.partition("?")[2]).get("access_token", [""])[0]
        if not hmac.compare_digest(presented.strip().encode(), self._token.encode()):
            raise HttpError(401, "this admin listener needs its token (admin.listener.token): send "
                                 "Authorization: Bearer <token>")

    async def _read_request(self, reader: asyncio.StreamReader) -> tuple[str, str, dict[str, str], bytes]:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise HttpError(431, f"request head over {MAX_HEAD_BYTES} bytes") from None
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise HttpError(400, "malformed request line")
        method, target = parts[0], parts[1]
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if line:
                name, sep, value = line.partition(":")
                if not sep:
                    raise HttpError(400, f"malformed header line {line[:80]!r}")
                headers[name.strip().lower()] = value.strip()
        if "chunked" in headers.get("transfer-encoding", "").lower():
            raise HttpError(411, "send the body with Content-Length, not chunked")
        length_text = headers.get("content-length", "0")
        if not length_text.isdigit():
            raise HttpError(400, f"bad Content-Length {length_text[:20]!r}")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            raise HttpError(413, f"body over {MAX_BODY_BYTES} bytes")
        body = await reader.readexactly(length) if length else b""
        return method, target, headers, body

    async def _respond(self, method: str, target: str, body: bytes) -> tuple[int, Any]:
        path, _, query_text = target.partition("?")
        path = path.rstrip("/") or "/"
        if path == "/state/wait":
            self._allow(method, "GET")
            return await self._wait_for_lso(urllib.parse.parse_qs(query_text))
        if path == "/cluster" or path.startswith("/cluster/"):
            return await self._cluster(method, path, body)
        if path == "/reset":
            self._allow(method, "POST")
            if self.services.reset is None:
                raise HttpError(503, "this broker cannot be reset")
            return 200, await self.services.reset()
        if path == "/metrics":
            self._allow(method, "GET")
            from minikafka.broker.observe.prometheus import (  # prometheus_client takes ~0.1 s to import
                CONTENT_TYPE,
                render_async,
            )

            return 200, Asset(CONTENT_TYPE, await render_async(self.services))
        if path == "/trace":
            self._allow(method, "GET")
            from minikafka.broker.observe import trace_http  # the flight recorder's modules load only when used

            try:
                return 200, trace_http.recent_exchanges(self._recorder(), urllib.parse.parse_qs(query_text))
            except trace_http.TraceQueryError as exc:
                raise HttpError(400, str(exc)) from None
        return self._route(method, path, body)

    async def _cluster(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        """GET /cluster; POST /cluster/nodes/{id}/stop|start; POST /cluster/partitions/{topic}/{p}/leader."""
        cluster = self.services.cluster
        parts = path.split("/")[2:]
        if not parts:
            self._allow(method, "GET")
            return 200, cluster.snapshot()
        self._allow(method, "POST")
        if len(parts) == 3 and parts[0] == "nodes" and parts[2] in ("stop", "start") and parts[1].isdigit():
            control = self.services.node_control
            node_id = int(parts[1])
            if control is None or node_id not in {node.node_id for node in cluster.nodes}:
                raise HttpError(404, f"no node {node_id}")
            await (control.stop_node(node_id) if parts[2] == "stop" else control.start_node(node_id))
            return 200, cluster.snapshot()
        if len(parts) == 4 and parts[0] == "partitions" and parts[3] == "leader" and parts[2].isdigit():
            topic, partition = urllib.parse.unquote(parts[1]), int(parts[2])
            meta = self.services.logs.topic(topic)
            if meta is None or partition >= meta.partitions:
                raise HttpError(404, f"no partition {topic}-{partition}")
            node = _json_body(body).get("node")
            if not isinstance(node, int):
                raise HttpError(400, 'body: {"node": <node id>}')
            try:
                state = cluster.move_leader(topic, partition, node)
            except ValueError as exc:
                raise HttpError(409, str(exc)) from None
            return 200, {"topic": topic, "partition": partition, "leader": state.leader,
                         "leader_epoch": state.leader_epoch, "replicas": list(state.replicas), "isr": list(state.isr)}
        raise HttpError(404, f"no such resource {path[:80]!r}; see GET /cluster")

    def _recorder(self) -> FlightRecorder:
        from minikafka.broker.observe.recorder import flight_recorder

        recorder = flight_recorder(self.services)
        if recorder is None:
            raise HttpError(409, "the flight recorder is off (minikafka.trace.ring.size=0 and no --trace)")
        return recorder

    async def _stream_trace(self, method: str, target: str, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> None:
        self._allow(method, "GET")
        from minikafka.broker.observe import trace_http

        query = urllib.parse.parse_qs(target.partition("?")[2])
        try:
            subscription = trace_http.open_stream(self._recorder(), query, len(self._trace_streams))
        except trace_http.TraceQueryError as exc:
            raise HttpError(400, str(exc)) from None
        except OverflowError as exc:
            raise HttpError(503, str(exc)) from None
        self._trace_streams.add(subscription)
        try:
            await trace_http.stream(subscription, reader, writer)
        finally:
            self._trace_streams.discard(subscription)

    async def _wait_for_lso(self, query: dict[str, list[str]]) -> tuple[int, Any]:
        topics = query.get("topic")
        if not topics or not topics[0]:
            raise HttpError(400, "query parameter topic is required")
        topic, partition, lso = topics[0], _query_int(query, "partition", 0), _query_int(query, "lso")
        timeout_ms = _query_int(query, "timeout_ms", DEFAULT_WAIT_MS)
        if not 0 <= timeout_ms <= MAX_WAIT_MS:
            raise HttpError(400, f"timeout_ms: from 0 to {MAX_WAIT_MS}, got {timeout_ms}")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_ms / 1000
        for _ in range(timeout_ms // int(_WAIT_POLL_S * 1000) + 2):  # the deadline ends it first
            state = partition_snapshot(self.services, topic, partition)
            if state is not None and state["last_stable_offset"] >= lso:
                return 200, {"topic": topic, "partition": state}
            if loop.time() >= deadline:
                break
            await asyncio.sleep(_WAIT_POLL_S)
        return 408, {"error": f"the last stable offset of {topic}-{partition} did not reach {lso} within "
                              f"{timeout_ms} ms", "topic": topic, "partition": state}

    def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        faults = fault_table(self.services)
        asset = ASSETS.get(path)
        if asset is not None:
            self._allow(method, "GET")
            return 200, asset
        if path == "/health":
            self._allow(method, "GET")
            return 200, {"status": "ok"}
        if path == "/state":
            self._allow(method, "GET")
            return 200, state_snapshot(self.services)
        if path == "/clock":
            self._allow(method, "GET")
            return 200, clock_snapshot(self.services)
        if path in ("/schema-registry", "/schema-registry/reset"):
            return self._schema_registry(method, path)
        if path == "/clock/advance":
            self._allow(method, "POST")
            return 200, advance_clock(self.services, _json_body(body).get("ms"))
        if path == "/crash-points":
            self._allow(method, "GET", "POST", "DELETE")
            crash_points = crash_points_of(self.services)
            if method == "GET":
                return 200, {"armed": crash_points.list(), "available": list(CRASH_POINTS)}
            if method == "DELETE":
                return 200, {"removed": crash_points.clear()}
            try:
                point = crash_points.arm(_json_body(body).get("point"))
            except CrashPointError as exc:
                raise HttpError(400, str(exc)) from None
            return 201, {"armed": point}
        if path == "/faults":
            self._allow(method, "GET", "POST", "DELETE")
            if method == "GET":
                return 200, {"faults": faults.list()}
            if method == "DELETE":
                return 200, {"removed": faults.clear()}
            try:
                spec = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                raise HttpError(400, f"body is not JSON: {exc}") from None
            try:
                rule = faults.add(spec)
            except FaultSpecError as exc:
                raise HttpError(400, str(exc)) from None
            return 201, {"fault": rule.to_json()}
        if path.startswith("/topics/"):
            self._allow(method, "DELETE")
            return 200, {"deleted": delete_topic(self.services, urllib.parse.unquote(path.removeprefix("/topics/")))}
        if path.startswith("/faults/"):
            self._allow(method, "GET", "DELETE")
            rule_id_text = path.removeprefix("/faults/")
            if not rule_id_text.isdigit():
                raise HttpError(404, f"no fault rule {rule_id_text[:40]!r}")
            found = faults.rules.get(int(rule_id_text))
            if found is None:
                raise HttpError(404, f"no fault rule {rule_id_text}")
            if method == "GET":
                return 200, {"fault": found.to_json()}
            faults.remove(found.id)
            return 200, {"removed": 1}
        raise HttpError(404, f"no such resource {path[:80]!r}; see GET /health, /faults, /state, /clock, "
                             "/crash-points, /metrics, /inspector, /trace, /topics/{name}, /reset, /schema-registry")

    def _schema_registry(self, method: str, path: str) -> tuple[int, Any]:
        registry = self.services.schema_registry
        if registry is None:
            raise HttpError(404, "this broker serves no schema registry (schema.registry.port)")
        if path == "/schema-registry":
            self._allow(method, "GET")
            return 200, registry.snapshot()
        self._allow(method, "POST")
        registry.reset()
        return 200, {"reset": True}

    @staticmethod
    def _allow(method: str, *allowed: str) -> None:
        if method not in allowed:
            raise HttpError(405, f"{method[:20]} not allowed here; use {', '.join(allowed)}")
