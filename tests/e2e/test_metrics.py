"""GET /metrics of a broker process that confluent-kafka, aiokafka and a raw socket drove.

One broker for the whole module, started here, so the counts it reports are all this test's doing.
"""

from __future__ import annotations

import asyncio
import http.client
import struct
import time
from collections.abc import Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from minikafka.testing import Broker
from prometheus_client.parser import text_string_to_metric_families

from tests.support.clients import create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.produce import SEND_AT_ONCE, numbered, produce
from tests.support.wire import Wire

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

RECORDS = 20  # in the plain topic, the last one through an injected error and a retry

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(mode="process") as broker:
        yield broker


def _samples(text: str) -> Samples:
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return samples


def _sum(samples: Samples, name: str, **labels: str) -> float:
    """The sum of `name` over every series whose labels include `labels`."""
    wanted = set(labels.items())
    return sum(value for (sample_name, sample_labels), value in samples.items()
               if sample_name == name and wanted <= set(sample_labels))


def _partition(samples: Samples, name: str, topic: str, partition: int = 0) -> float:
    return samples[(name, (("partition", str(partition)), ("topic", topic)))]


async def _until(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)


async def test_metrics_after_real_clients(broker: Broker) -> None:
    bootstrap = broker.bootstrap_servers
    plain, transactional, group = unique_topic("plain"), unique_topic("txn"), unique_topic("group")
    create_topic(bootstrap, plain)
    create_topic(bootstrap, transactional)

    before = _samples(broker.metrics())
    await asyncio.to_thread(produce, bootstrap, plain, numbered(RECORDS - 1, "record-"), flush_each=True, acks="all",
                            **SEND_AT_ONCE)
    after = _samples(broker.metrics())
    produce_requests = "kafka_network_requestmetrics_requests_total"
    assert _sum(after, produce_requests, request="Produce") - _sum(before, produce_requests, request="Produce") \
        == RECORDS - 1
    assert _sum(after, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") \
        - _sum(before, "kafka_network_requestmetrics_errors_total", request="Produce", error="NONE") == RECORDS - 1

    # The last record meets an injected, retriable error once; the client retries it.
    fault = broker.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=1, topic=plain)
    await asyncio.to_thread(produce, bootstrap, plain, numbered(1, "record-"), flush_each=True, acks="all",
                            **SEND_AT_ONCE)
    assert [rule["id"] for rule in broker.faults()] == [], f"rule {fault['id']} fired and is gone"

    def commit_one() -> None:
        producer = transactional_producer(bootstrap, unique_topic("committer"))
        producer.begin_transaction()
        producer.produce(transactional, b"committed")
        producer.commit_transaction(15)

    await asyncio.to_thread(commit_one)  # offsets 0 (the record) and 1 (its commit marker)
    open_id = unique_topic("left-open")
    open_producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=open_id)
    consumer = AIOKafkaConsumer(plain, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=10000, heartbeat_interval_ms=300)
    await open_producer.start()
    try:
        await open_producer.begin_transaction()
        await open_producer.send_and_wait(transactional, b"undecided")  # offset 2, left open
        await consumer.start()
        await _until(lambda: bool(consumer.assignment()))

        wire = Wire(broker)  # a Metadata v12 request whose body does not decode
        wire.send(_undecodable_metadata_request())
        assert wire.is_closed()
        wire.close()

        status, content_type, text = _get(broker, "/metrics")
        assert status == 200
        assert content_type == "text/plain; version=0.0.4; charset=utf-8"
        samples = _samples(text)
        for api in ("ApiVersions", "Metadata", "CreateTopics", "InitProducerId", "AddPartitionsToTxn", "EndTxn",
                    "FindCoordinator", "JoinGroup", "SyncGroup", "Produce"):
            assert _sum(samples, produce_requests, request=api) >= 1, api
        assert _sum(samples, produce_requests, request="CreateTopics") >= 2
        assert samples[("kafka_network_requestmetrics_errors_total",
                        (("error", "NOT_LEADER_OR_FOLLOWER"), ("request", "Produce")))] == 1
        for api in ("Produce", "Metadata", "JoinGroup"):
            assert samples[("kafka_network_requestmetrics_totaltimems_count", (("request", api),))] \
                == _sum(samples, produce_requests, request=api), f"every {api} request timed once"
        assert samples[("kafka_server_socket_server_metrics_incoming_byte_total", ())] \
            == _sum(samples, "minikafka_request_bytes_total") > 0
        assert samples[("kafka_server_socket_server_metrics_outgoing_byte_total", ())] \
            == _sum(samples, "minikafka_response_bytes_total") > 0
        assert samples[("kafka_server_socket_server_metrics_connection_count", ())] >= 2

        assert _partition(samples, "kafka_log_log_logendoffset", plain) == RECORDS
        assert _partition(samples, "minikafka_partition_high_watermark", plain) == RECORDS
        assert _partition(samples, "minikafka_partition_last_stable_offset", plain) == RECORDS
        assert _partition(samples, "kafka_log_log_logstartoffset", plain) == 0
        assert _partition(samples, "kafka_log_log_logendoffset", transactional) == 3
        assert _partition(samples, "minikafka_partition_last_stable_offset", transactional) == 2, \
            "stops at the open transaction's first record"

        assert samples[("minikafka_transactions_open", ())] == 1
        assert samples[("minikafka_transactions", (("state", "Ongoing"),))] == 1
        assert samples[("minikafka_transactions", (("state", "CompleteCommit"),))] == 1
        assert samples[("minikafka_transaction_open_age_seconds", (("transactional_id", open_id),))] >= 0
        assert [labels for name, labels in samples if name == "minikafka_transaction_open_age_seconds"] \
            == [(("transactional_id", open_id),)]

        assert samples[("kafka_server_group_coordinator_metrics_classic_group_count", (("state", "Stable"),))] == 1
        assert samples[("minikafka_connections_closed_bad_input_total", (("reason", "invalid request"),))] == 1
        assert _sum(samples, "minikafka_connections_closed_bad_input_total") == 1
        assert _sum(samples, "minikafka_unexpected_handler_errors_total") == 0
    finally:
        await consumer.stop()
        await open_producer.stop()


def _undecodable_metadata_request() -> bytes:
    """Header v2 (key 3, version 12, correlation id 7, client id "", no tags), then a compact array length
    that is a varint of more than five bytes."""
    request = struct.pack(">hhih", 3, 12, 7, 0) + b"\x00" + b"\xff" * 8
    return struct.pack(">i", len(request)) + request


def _get(broker: Broker, path: str) -> tuple[int, str, str]:
    assert broker.admin_url is not None
    host, port = broker.admin_url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    finally:
        connection.close()


def test_in_process_broker_metrics() -> None:
    """Broker.metrics() without an admin listener: in process mode it runs on the broker's loop."""
    with Broker() as broker:
        assert broker.admin_url is None
        topic = unique_topic("inproc")
        produce(broker.bootstrap_servers, topic, numbered(3, "record-"), flush_each=True, **SEND_AT_ONCE, acks="all")
        samples = _samples(broker.metrics())
    assert _partition(samples, "kafka_log_log_logendoffset", topic) == 3
    assert _sum(samples, "kafka_network_requestmetrics_requests_total", request="Produce") == 3
