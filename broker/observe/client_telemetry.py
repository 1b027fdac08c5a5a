"""Client telemetry (KIP-714) where people debug: each client instance's own pushed metrics beside what the
broker saw of its connections, for the inspector (GET /state "clients") and /metrics.

The broker's view of a client instance is every tracked connection (broker/observe/metrics.py) from the
same client id and host as the connections it pushed telemetry on: a librdkafka client talks over its
bootstrap connection and one per broker, and pushes over one of them. Two clients in one process sharing
a client id are shown together.
"""

from __future__ import annotations

from typing import Any

from minikafka.broker.observe.metrics import ConnectionStats, broker_metrics, kafka_request_name
from minikafka.broker.wire.services import BrokerServices
from minikafka.coordinator.client_metrics.manager import ClientInstance
from minikafka.protocol.records import Compression
from minikafka.protocol.telemetry import MetricPoint


def _host(peer: str) -> str:
    return peer.rpartition(":")[0]


def broker_view(services: BrokerServices, instance: ClientInstance) -> list[ConnectionStats]:
    connections = broker_metrics(services).connections
    known = [connections[i] for i in sorted(instance.connection_ids) if i in connections]
    hosts = {_host(c.peer) for c in known} or {instance.client.source_address}
    client_id = instance.client.client_id
    return [c for c in connections.values()
            if c.connection_id in instance.connection_ids or (c.client_id == client_id and _host(c.peer) in hosts)]


def _connection_state(connection: ConnectionStats) -> dict[str, Any]:
    apis = {}
    requests = latency_ns = 0
    for api_key, (count, total_ns, max_ns) in sorted(connection.apis.items()):
        apis[kafka_request_name(api_key)] = {"requests": count, "latency_avg_ms": round(total_ns / count / 1e6, 3),
                                             "latency_max_ms": round(max_ns / 1e6, 3)}
        requests += count
        latency_ns += total_ns
    return {"connection_id": connection.connection_id, "peer": connection.peer, "client_id": connection.client_id,
            "first_ms": connection.first_ms, "last_ms": connection.last_ms, "requests": requests,
            "latency_avg_ms": round(latency_ns / requests / 1e6, 3) if requests else None,
            "bytes_in": connection.bytes_in, "bytes_out": connection.bytes_out, "apis": apis}


def point_state(point: MetricPoint, total: float | None = None) -> dict[str, Any]:
    state: dict[str, Any] = {"name": point.name, "kind": point.kind, "value": point.value,
                             "attributes": dict(point.attributes)}
    if point.count is not None:
        state["count"] = point.count
    if point.kind == "sum":
        state["delta"] = point.delta
    if total is not None:
        state["total"] = total
    if point.unit:
        state["unit"] = point.unit
    return state


def _codec_name(codec: int | None) -> str | None:
    return None if codec is None else Compression(codec).name.lower()


def instance_state(services: BrokerServices, instance: ClientInstance) -> dict[str, Any]:
    client = instance.client
    return {
        "client_instance_id": str(instance.instance_id), "client_id": client.client_id,
        "client_software_name": client.software_name, "client_software_version": client.software_version,
        "client_source_address": client.source_address, "client_source_port": client.source_port,
        "subscriptions": list(instance.subscriptions), "requested_metrics": list(instance.metrics),
        "push_interval_ms": instance.push_interval_ms, "subscription_id": instance.subscription_id,
        "pushes": instance.pushes, "throttled": instance.throttled, "push_errors": instance.push_errors,
        "last_push_ms": instance.last_push_ms or None,
        "last_push_bytes": instance.last_push_bytes, "compression": _codec_name(instance.last_compression),
        "last_error": instance.last_error.name.upper(), "terminating": instance.terminating,
        "resource": dict(instance.resource), "points_dropped": instance.points_dropped,
        "metrics": [point_state(point, instance.totals.get(point.key) if point.delta else None)
                    for point in instance.points],
        "broker_view": [_connection_state(c) for c in broker_view(services, instance)],
    }


def clients_state(services: BrokerServices) -> dict[str, Any]:
    """Every client instance the broker knows, by client instance id."""
    return {str(instance.instance_id): instance_state(services, instance)
            for instance in sorted(services.client_metrics.instances(), key=lambda i: (str(i.client.client_id),
                                                                                        str(i.instance_id)))}
