"""`--trace` to a disk that fills up: the file stops (one error line in the broker log) and the in-memory
ring goes on, so Broker.trace(), GET /trace and the inspector's live trace keep showing requests. /dev/full
answers every write with ENOSPC, as a full disk does."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

from confluent_kafka import Producer
from minikafka.testing import Broker

FULL = Path("/dev/full")


def test_the_ring_goes_on_when_the_trace_file_cannot_be_written() -> None:
    assert FULL.exists(), "Linux's /dev/full stands in for a full disk"
    with Broker({"minikafka.trace.file": str(FULL)}) as broker:
        topic = f"traced-{uuid.uuid4().hex[:8]}"
        for round_ in range(2):  # the second round comes after the file has failed
            producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "client.id": f"round-{round_}"})
            producer.produce(topic, b"value")
            assert producer.flush(15) == 0
        deadline = time.monotonic() + 15
        while not broker.trace(api="Produce", client_id="round-1"):
            assert time.monotonic() < deadline, "the ring stopped recording after the trace file failed"
            time.sleep(0.05)
        assert broker.trace(api="Produce", client_id="round-0")
        assert broker.logs().count("trace file write failed; tracing stopped") == 1
