"""What a handler gets: the request's identity and the services of the node it arrived at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import structlog
from minikafka.protocol.api_keys import api_name

if TYPE_CHECKING:
    from minikafka.broker.security.session import Session
    from minikafka.broker.wire.cluster import Node
    from minikafka.broker.wire.services import BrokerServices


@dataclass(slots=True)
class RequestContext:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection_id: int
    peer: str
    node: Node
    services: BrokerServices
    # The connection's listener, client address and principal (shared by its requests; SASL updates it).
    session: Session
    # Set by a throttling fault: the connection reads no further request for this long after sending the
    # response, as Kafka mutes a throttled channel (KIP-219).
    mute_ms: int = 0
    # Set where Kafka closes the connection once the response is sent (a failed SASL authentication), after
    # connection.failed.authentication.delay.ms.
    close_after_response: bool = False
    # The request frame's size without its size prefix (Kafka's request.sizeInBytes: what Produce quotas count).
    request_size: int = 0
    # The throttle time a controller mutation quota recorded while handling (broker/wire/quotas.py).
    mutation_throttle_ms: int = 0
    _log: Any = field(default=None, repr=False)

    @property
    def log(self) -> Any:
        # Bound lazily: most requests never log, and binding costs a dict copy.
        if self._log is None:
            self._log = structlog.get_logger("minikafka.request").bind(
                api=api_name(self.api_key),
                api_version=self.api_version,
                correlation_id=self.correlation_id,
                client_id=self.client_id,
                connection_id=self.connection_id,
                node_id=self.node.node_id,
            )
        return self._log
