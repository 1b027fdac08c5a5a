"""What the telemetry handlers share: the client as the connection knows it."""

from __future__ import annotations

from minikafka.broker.wire.context import RequestContext
from minikafka.coordinator.client_metrics.manager import ClientInformation


def client_information(ctx: RequestContext) -> ClientInformation:
    """The attributes KIP-714's `match` patterns select on, from the request and its connection."""
    _host, _, port = ctx.peer.rpartition(":")
    session = ctx.session
    return ClientInformation(
        client_id=ctx.client_id, software_name=session.client_software_name,
        software_version=session.client_software_version, source_address=session.client_host,
        source_port=int(port) if port.isdigit() else None, connection_id=ctx.connection_id)
