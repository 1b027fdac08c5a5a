"""Wires the debugging aids a config asks for into a node's observers (broker/wire/hooks.py).

The flight recorder (broker/observe/recorder.py) keeps its in-memory ring whenever
`minikafka.trace.ring.size` > 0, for GET /trace and the inspector, and writes JSON lines when
`minikafka.trace.file` is set; the pcap writer (broker/observe/pcap.py) runs only when `minikafka.pcap.file`
is set. Their modules are imported only when used, so a plain broker does not pay for them. The
metrics observer (broker/observe/metrics.py) is always installed: it only adds to integers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from minikafka.broker.config.config import BrokerConfig
    from minikafka.broker.wire.services import BrokerServices


def install_debugging(services: BrokerServices, config: BrokerConfig) -> list[Callable[[], None]]:
    """Start what `config` asks for; return the closers to call at shutdown (they flush files)."""
    closers: list[Callable[[], None]] = []
    # Always: a few integer additions per request (broker/observe/metrics.py), and GET /metrics or
    # Broker.metrics() can then answer for everything since the start.
    services.observers.exchanges.append(services.metrics.observe)
    if config.trace_ring_size > 0 or config.trace_file is not None:
        from minikafka.broker.observe.recorder import FlightRecorder

        recorder = FlightRecorder(
            ring_size=config.trace_ring_size, trace_file=config.trace_file, decode_records=config.trace_records,
            apis=config.trace_apis, client_ids=config.trace_client_ids, topics=config.trace_topics,
            resolve_topic=lambda topic_id: getattr(services.logs.topic_by_id(topic_id), "name", None))
        services.recorder = recorder
        services.observers.exchanges.append(recorder.observe)
        closers.append(recorder.close)
    if config.pcap_file is not None:
        from minikafka.broker.observe.pcap import PcapWriter

        pcap = PcapWriter(config.pcap_file, services.clock)
        services.observers.taps.append(pcap)
        closers.append(pcap.close)
    return closers
