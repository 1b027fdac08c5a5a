"""`--pcap FILE` opened by Debian's tshark: real clients drive a broker, and the requests tshark's Kafka
dissector decodes from the capture are exactly the ones the broker's flight recorder saw.

Wireshark 4.0's Kafka dissector (Debian 12) knows the protocol up to Kafka 2.5: it flags newer versions
itself ("Unsupported ... version", kafka.unsupported_api_version) and, for those, may throw on the body
(Malformed Packet) after decoding the header. It also misreads the byte-array fields of JoinGroup and
SyncGroup (protocol metadata and member assignments show as <MISSING>) and then reports "Dissected
message does not end at the pdu length offset", a malformed warning. So: headers are compared in full;
a malformed report is allowed only where tshark says the version is beyond it or for those two APIs;
every request frame of the capture is decoded by the broker's own codec, which shows that their bytes
are well-formed requests; and a client held to Kafka 2.0's versions, without a group, must give a
capture with no malformed packet at all."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v1.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i16
from minikafka.broker.observe.pcap import PcapWriter
from minikafka.protocol.api_keys import api_name
from minikafka.protocol.codec import decode_request, encode_request, encode_response
from minikafka.storage.clock import ManualClock
from minikafka.testing import Broker

from tests.pcap_reader import flows, read_pcap
from tests.support.clients import create_topic, transactional_producer
from tests.support.names import unique_topic
from tests.support.waiting import poll_until

pytestmark = pytest.mark.e2e

TSHARK = shutil.which("tshark")
JOIN_GROUP, SYNC_GROUP = 11, 14
# APIs whose well-formed frames Wireshark 4.0's dissector reports as malformed (see the module docstring).
DISSECTOR_DEFECTS = frozenset({JOIN_GROUP, SYNC_GROUP})
TCP_COMPLETE = 31  # tcp.completeness: SYN, SYN-ACK, ACK, data and FIN all seen

Triple = tuple[int, int, int]  # api key, api version, correlation id


def _tshark() -> str:
    if TSHARK is None:
        if os.environ.get("CI") == "true":
            pytest.fail("tshark is not installed (apt-get install tshark)")
        pytest.skip("tshark is not installed")
    return TSHARK


def _fields(pcap: Path, port: int, display_filter: str, *fields: str, options: tuple[str, ...] = ()) -> list[list[str]]:
    """One row per packet tshark shows for `display_filter`, with the first occurrence of each field."""
    result = subprocess.run(
        [_tshark(), "-r", str(pcap), "-2", "-d", f"tcp.port=={port},kafka", *options, "-Y", display_filter,
         "-T", "fields", "-E", "occurrence=f", "-E", "separator=\t", *(a for f in fields for a in ("-e", f))],
        capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [line.split("\t") for line in result.stdout.splitlines()]


def _broker(broker_factory: Callable[..., Broker], tmp_path: Path, *, trace: bool = False) -> Broker:
    overrides = {"minikafka.pcap.file": str(tmp_path / "capture.pcap")}
    if trace:
        overrides["minikafka.trace.file"] = str(tmp_path / "trace.jsonl")
    return broker_factory(**overrides)


def _api_key_by_name() -> dict[str, int]:
    """The trace's API names, spelled either way (ApiVersions or API_VERSIONS), to keys."""
    return {api_name(key).replace("_", "").lower(): key for key in range(100)}


def _traced_requests(trace: Path) -> tuple[dict[int, list[Triple]], dict[int, list[int]]]:
    """From the flight recorder: per client port, the requests in order, and the correlation ids answered."""
    keys = _api_key_by_name()
    requests: dict[int, list[Triple]] = {}
    answered: dict[int, list[int]] = {}
    for line in trace.read_text().splitlines():
        entry = json.loads(line)
        port = int(entry["peer"].rsplit(":", 1)[1])
        key = keys[entry["api"].replace("_", "").lower()]
        requests.setdefault(port, []).append((key, entry["api_version"], entry["correlation_id"]))
        if entry["outcome"] == "answered":
            answered.setdefault(port, []).append(entry["correlation_id"])
    return requests, answered


def _captured_requests(pcap: Path, broker_port: int) -> tuple[dict[int, list[Triple]], dict[int, list[int]]]:
    """The same, parsed from the capture's reassembled TCP streams, and every request decoded by our codec."""
    requests: dict[int, list[Triple]] = {}
    answered: dict[int, list[int]] = {}
    _linktype, segments = read_pcap(pcap)
    assert all(s.ip_checksum_ok and s.tcp_checksum_ok for s in segments)
    for (_src, sport, _dst, dport), flow in flows(segments).items():
        if dport == broker_port:
            triples = [struct.unpack_from(">hhi", frame) for frame in flow.frames()]
            for frame, (key, version, _correlation) in zip(flow.frames(), triples, strict=True):
                decode_request(frame, key, version)  # raises on a frame that is not a well-formed request
            requests[sport] = triples
        else:
            answered[dport] = [struct.unpack_from(">i", frame)[0] for frame in flow.frames()]
    return requests, answered


def _by_port(rows: list[list[str]]) -> dict[int, list[tuple[int, ...]]]:
    grouped: dict[int, list[tuple[int, ...]]] = {}
    for port, *values in rows:
        grouped.setdefault(int(port), []).append(tuple(int(v) for v in values))
    return grouped


def _drive_clients(bootstrap: str) -> None:
    """Produce (one record big enough to span several TCP segments), consume in a group, a transaction,
    with confluent-kafka and kafka-python."""
    topic = unique_topic("pcap")
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for index in range(10):
        producer.produce(topic, value=b"x" * 200_000 if index == 3 else b"value-%d" % index)
    assert producer.flush(15) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": unique_topic("g"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    received: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(received) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            received.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    assert len(received) == 10

    transactional = transactional_producer(bootstrap, unique_topic("tid"))
    transactional.begin_transaction()
    transactional.produce(topic, value=b"in-transaction")
    transactional.commit_transaction(15)

    kafka_python = KafkaProducer(bootstrap_servers=bootstrap)
    kafka_python.send(topic, b"from-kafka-python").get(timeout=15)
    kafka_python.close()
    group_reader = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=unique_topic("kg"),
                                 auto_offset_reset="earliest", consumer_timeout_ms=20_000)
    read = 0
    for _message in group_reader:
        read += 1
        if read == 12:
            break
    group_reader.commit()
    group_reader.close()
    assert read == 12


def test_tshark_decodes_the_requests_the_broker_saw(broker_factory, tmp_path: Path) -> None:
    _tshark()
    broker = _broker(broker_factory, tmp_path, trace=True)
    _drive_clients(broker.bootstrap_servers)
    assert broker.stop() == 0
    assert "wire tap failed" not in broker.logs() and "pcap capture failed" not in broker.logs()
    pcap, port = tmp_path / "capture.pcap", broker.port

    traced, traced_answers = _traced_requests(tmp_path / "trace.jsonl")
    captured, captured_answers = _captured_requests(pcap, port)
    assert captured == traced
    assert captured_answers == traced_answers
    assert len(traced) >= 6, "connections from the producer, consumer, coordinator and kafka-python"

    decoded = _by_port(_fields(pcap, port, f"tcp.dstport=={port} && kafka.correlation_id", "tcp.srcport",
                               "kafka.api_key", "kafka.api_version", "kafka.correlation_id"))
    assert decoded == traced
    decoded_answers = _by_port(_fields(pcap, port, f"tcp.srcport=={port} && kafka.correlation_id", "tcp.dstport",
                                       "kafka.correlation_id"))
    assert {p: [c for (c,) in rows] for p, rows in decoded_answers.items()} == traced_answers

    # The synthetic TCP is flawless to Wireshark: checksums verified, no analysis flag, every stream whole.
    bad_tcp = _fields(pcap, port, "tcp.analysis.flags || ip.checksum.status != 1 || tcp.checksum.status != 1",
                      "frame.number", "_ws.expert.message",
                      options=("-o", "tcp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE"))
    assert bad_tcp == []
    completeness = _by_port(_fields(pcap, port, "tcp", "tcp.stream", "tcp.completeness"))  # keyed by stream
    assert len(completeness) == len(traced)
    assert all(row == (TCP_COMPLETE,) for rows in completeness.values() for row in rows)

    # Every malformed report is the dissector's own limit: a version it says it does not support, or
    # one of its known defects; the request frames among them were decoded by our codec above.
    malformed = _fields(pcap, port, "_ws.malformed && !kafka.unsupported_api_version", "frame.number",
                        "kafka.api_key", "kafka.response_key", "_ws.expert.message")
    assert all((row[1] or row[2]) and int(row[1] or row[2]) in DISSECTOR_DEFECTS for row in malformed), malformed
    multi_segment = _fields(pcap, port, f"tcp.dstport=={port} && kafka.api_key == 0 && tcp.reassembled.length",
                            "frame.number", "tcp.reassembled.length")
    assert any(int(length) > 200_000 for _frame, length in multi_segment), "the big record's produce spans segments"


def test_a_client_on_versions_wireshark_knows_gets_a_capture_without_a_malformed_packet(
        broker_factory, tmp_path: Path) -> None:
    _tshark()
    broker = _broker(broker_factory, tmp_path)
    topic = unique_topic("pcap-old")
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers, api_version=(2, 0, 0))
    admin.create_topics([NewTopic(topic, 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, api_version=(2, 0, 0),
                             transactional_id=unique_topic("tid"))
    producer.init_transactions()
    producer.begin_transaction()
    for index in range(3):
        producer.send(topic, b"v%d" % index)
    producer.commit_transaction()
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, api_version=(2, 0, 0),
                             isolation_level="read_committed", consumer_timeout_ms=20_000)
    consumer.assign([KafkaTopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = [message.value for _index, message in zip(range(3), consumer, strict=False)]
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]
    assert broker.stop() == 0

    pcap, port = tmp_path / "capture.pcap", broker.port
    captured, _answers = _captured_requests(pcap, port)  # the trace is compared in the test above
    keys_used = {key for triples in captured.values() for key, _version, _correlation in triples}
    assert {0, 1, 22, 24, 26} <= keys_used, "produce, fetch, InitProducerId, AddPartitionsToTxn, EndTxn"
    decoded = _by_port(_fields(pcap, port, f"tcp.dstport=={port} && kafka.correlation_id", "tcp.srcport",
                               "kafka.api_key", "kafka.api_version", "kafka.correlation_id"))
    assert decoded == captured
    # ApiVersions responses carry tshark's "Unsupported version" warnings about what the broker offers;
    # no request is beyond it and no packet is malformed.
    assert _fields(pcap, port, f"_ws.malformed || tcp.analysis.flags || (tcp.dstport=={port} && "
                   "kafka.unsupported_api_version)", "frame.number", "_ws.expert.message") == []


def test_a_broker_killed_with_9_leaves_a_capture_readable_up_to_its_last_flush(broker_factory, tmp_path: Path) -> None:
    _tshark()
    broker = _broker(broker_factory, tmp_path)
    pcap, port = tmp_path / "capture.pcap", broker.port
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    producer.produce(unique_topic("pcap-kill"), value=b"before the kill")
    assert producer.flush(15) == 0

    def produce_on_disk() -> bool:
        _linktype, segments = read_pcap(pcap, cut_short_ok=True)
        return any(struct.unpack_from(">h", frame)[0] == 0
                   for (_s, _sp, _d, dport), flow in flows(segments).items() if dport == port
                   for frame in flow.frames(cut_short_ok=True))

    poll_until(produce_on_disk, timeout=10, message="the periodic flush to write the produce request")
    broker.kill()
    produced = _fields(pcap, port, f"tcp.dstport=={port} && kafka.api_key == 0", "kafka.correlation_id")
    assert len(produced) >= 1


def test_an_ipv6_conversation_is_written_as_ipv6_and_reassembled_by_tshark(tmp_path: Path) -> None:
    """The broker's tests listen on 127.0.0.1 only, so IPv6 is checked on a capture written directly."""
    _tshark()
    pcap = tmp_path / "v6.pcap"
    writer = PcapWriter(str(pcap), ManualClock())
    writer.connection_opened(1, ("::1", 40000), ("::1", 19092))
    writer.frame(1, True, encode_request(7, ApiVersionsRequest(), client_id="v6"))
    writer.frame(1, False, encode_response(7, ApiVersionsResponse(
        error_code=ErrorCode.none, api_keys=(ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(3)),))))
    names = tuple(MetadataRequestTopic(name=TopicName(f"topic-{n:06d}")) for n in range(12_000))  # ~150 kB
    writer.frame(1, True, encode_request(8, MetadataRequest(topics=names), client_id="v6"))
    writer.frame(1, False, encode_response(8, MetadataResponse(brokers=(), controller_id=BrokerId(0), topics=())))
    writer.connection_closed(1)
    writer.close()

    rows = _fields(pcap, 19092, "kafka.correlation_id", "ipv6.src", "tcp.srcport", "kafka.request_key",
                   "kafka.response_key", "kafka.correlation_id", "tcp.reassembled.length")
    assert [row[:5] for row in rows] == [["::1", "40000", "18", "", "7"], ["::1", "19092", "", "18", "7"],
                                         ["::1", "40000", "3", "", "8"], ["::1", "19092", "", "3", "8"]]
    assert int(rows[2][5]) > 150_000
    assert _fields(pcap, 19092, "_ws.malformed || tcp.analysis.flags || tcp.checksum.status != 1", "frame.number",
                   options=("-o", "tcp.check_checksum:TRUE")) == []
