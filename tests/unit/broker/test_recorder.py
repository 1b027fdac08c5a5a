"""The flight recorder's rendering of kio bodies and record batches, its ring, filters, file and subscriptions."""

from __future__ import annotations

import asyncio
import gc
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import schema_name_map
from minikafka.broker.observe.recorder import FlightRecorder, TraceClosed, iso_time
from minikafka.broker.wire.hooks import ANSWERED, CLOSED, Exchange, HttpExchange
from minikafka.protocol.api_keys import ApiKey, api_key_by_name, kafka_api_name
from minikafka.protocol.build import build
from minikafka.protocol.records import Compression, ControlType, Record, build_batch, build_control_batch
from minikafka.protocol.regions import FileRegion
from minikafka.protocol.render import MAX_BATCHES_SUMMARISED, Walk, kafka_uuid, render_body
from minikafka.storage.config import LogConfig
from minikafka.storage.log import REGION_MIN_BYTES, PartitionLog

from tests.support.descriptors import open_descriptor_targets


def _exchange(api_key: int, version: int, request: Any = None, response: Any = None, *, client_id: str = "c",
              connection_id: int = 1, correlation_id: int = 1, outcome: str = ANSWERED,
              close_reason: str | None = None) -> Exchange:
    return Exchange(time_ms=1_700_000_000_123, node_id=0, connection_id=connection_id, peer="127.0.0.1:40000",
                    client_id=client_id, api_key=api_key, api_version=version, correlation_id=correlation_id,
                    latency_ns=1_234_567, request_bytes=100, response_bytes=50, outcome=outcome, request=request,
                    response=response, close_reason=close_reason)


def _recorder(**options: Any) -> FlightRecorder:
    settings: dict[str, Any] = {"ring_size": 100, "trace_file": None, "decode_records": False, "apis": (),
                                "client_ids": (), "topics": ()}
    settings.update(options)
    return FlightRecorder(**settings)


def _produce(topic: str, records: bytes, *, transactional_id: str | None = None) -> Any:
    return build(load_request_schema(ApiKey.PRODUCE, 9), transactional_id=transactional_id, acks=-1, timeout=30000,
                 topic_data=[{"name": topic, "partition_data": [{"index": 0, "records": records}]}])


def _fetch_response(records: bytes, topic: str = "t") -> Any:
    return build(load_response_schema(ApiKey.FETCH, 12), responses=[
        {"topic": topic, "partitions": [{"partition_index": 0, "high_watermark": 10, "records": records}]}])


def _transactional_batch(base_sequence: int = 0, compression: int = Compression.NONE) -> bytes:
    return build_batch([Record(key=b"k%d" % i, value=b"value %d" % i, timestamp=1_700_000_000_000 + i)
                        for i in range(3)], producer_id=4000, producer_epoch=7, base_sequence=base_sequence,
                       transactional=True, compression=compression, partition_leader_epoch=0)


def test_kafka_api_names() -> None:
    assert [kafka_api_name(key) for key in (ApiKey.PRODUCE, ApiKey.FIND_COORDINATOR, ApiKey.END_TXN,
                                            ApiKey.INIT_PRODUCER_ID, ApiKey.OFFSET_FOR_LEADER_EPOCH,
                                            ApiKey.API_VERSIONS, ApiKey.TXN_OFFSET_COMMIT)] == [
        "Produce", "FindCoordinator", "EndTxn", "InitProducerId", "OffsetForLeaderEpoch", "ApiVersions",
        "TxnOffsetCommit"]
    assert kafka_api_name(68) == "ConsumerGroupHeartbeat"  # known to kio, not served here
    assert api_key_by_name("EndTxn") == api_key_by_name("END_TXN") == api_key_by_name("26") == 26
    assert api_key_by_name("NoSuchApi") is None


def test_entry_fields_and_error_names() -> None:
    response = build(load_response_schema(ApiKey.FIND_COORDINATOR, 4), throttle_time=25, coordinators=[
        {"key": "tid", "node_id": -1, "host": "", "port": -1, "error_code": 16, "error_message": "not here"}])
    request = build(load_request_schema(ApiKey.FIND_COORDINATOR, 4), key_type=1, coordinator_keys=["tid"])
    recorder = _recorder()
    recorder.observe(_exchange(ApiKey.FIND_COORDINATOR, 4, request, response))
    [entry] = recorder.recent()
    assert entry["time"] == "2023-11-14T22:13:20.123Z" and entry["time_ms"] == 1_700_000_000_123
    assert (entry["api"], entry["api_key"], entry["api_version"]) == ("FindCoordinator", 10, 4)
    assert entry["latency_ms"] == 1.235 and entry["outcome"] == "answered" and "close_reason" not in entry
    assert entry["request"] == {"key_type": 1, "coordinator_keys": ["tid"]}
    assert entry["response"] == {"throttle_time_ms": 25, "coordinators": [
        {"key": "tid", "node_id": -1, "host": "", "port": -1, "error_code": "NOT_COORDINATOR",
         "error_message": "not here"}]}
    assert entry["errors"] == ["NOT_COORDINATOR"]
    json.dumps(entry)


def test_produce_batches_are_summarised_from_their_headers() -> None:
    first = _transactional_batch(0, Compression.GZIP)
    second = _transactional_batch(3)
    request = _produce("orders", first + second, transactional_id="tid-1")
    rendered = render_body(request, walk := Walk())
    assert walk.topics == {"orders"}
    records = rendered["topic_data"][0]["partition_data"][0]["records"]
    assert records["sizeInBytes"] == len(first) + len(second)
    assert records["batches"][0] == {
        "baseOffset": 0, "lastOffset": 2, "count": 3, "baseSequence": 0, "lastSequence": 2, "producerId": 4000,
        "producerEpoch": 7, "partitionLeaderEpoch": 0, "isTransactional": True, "isControl": False,
        "deleteHorizonMs": None, "position": 0,
        "timestampType": "CreateTime", "baseTimestamp": 1_700_000_000_000, "maxTimestamp": 1_700_000_000_002,
        "size": len(first), "magic": 2, "compresscodec": "gzip", "crc": records["batches"][0]["crc"]}
    assert records["batches"][1]["position"] == len(first) and records["batches"][1]["baseSequence"] == 3
    assert records["batches"][1]["compresscodec"] == "none"
    assert all("records" not in batch for batch in records["batches"])
    assert rendered["timeout_ms"] == 30000 and rendered["transactional_id"] == "tid-1"


def test_decoded_records_and_control_markers() -> None:
    data = build_batch([Record(key=None, value=b"\x00\xffbinary", headers=(("trace", b"abc"), ("nul", None)),
                               timestamp=5), Record(key=b"text key", value=b"line\ttab", timestamp=6)],
                       producer_id=9, producer_epoch=1, base_sequence=10, transactional=True)
    commit = build_control_batch(producer_id=9, producer_epoch=1, control_type=ControlType.COMMIT,
                                 coordinator_epoch=3, timestamp=7, base_offset=2)
    abort = build_control_batch(producer_id=9, producer_epoch=1, control_type=ControlType.ABORT,
                                coordinator_epoch=3, timestamp=8, base_offset=3)
    rendered = render_body(_fetch_response(data + commit + abort), Walk(decode_records=True))
    batches = rendered["responses"][0]["partitions"][0]["records"]["batches"]
    assert batches[0]["records"] == [
        {"offset": 0, "timestamp": 5, "sequence": 10, "key": None, "value": {"base64": "AP9iaW5hcnk="},
         "headers": [{"key": "trace", "value": "abc"}, {"key": "nul", "value": None}]},
        {"offset": 1, "timestamp": 6, "sequence": 11, "key": "text key", "value": "line\ttab", "headers": []}]
    assert batches[1]["isControl"] is True and batches[1]["baseOffset"] == 2
    assert batches[1]["records"] == [{"offset": 2, "timestamp": 7, "sequence": -1, "endTxnMarker": "COMMIT",
                                      "coordinatorEpoch": 3}]
    assert batches[2]["records"][0]["endTxnMarker"] == "ABORT"


def test_fetch_responses_end_in_partial_batches_and_cap_the_summaries() -> None:
    one = _transactional_batch()
    many = b"".join([one] * (MAX_BATCHES_SUMMARISED + 5))
    records = render_body(_fetch_response(many + one[:70]), Walk())["responses"][0]["partitions"][0]["records"]
    assert len(records["batches"]) == MAX_BATCHES_SUMMARISED
    assert records["batchesNotShown"] == 5 and records["partialBytes"] == 70
    broken = bytearray(one)
    broken[16] = 1  # magic v1
    records = render_body(_fetch_response(bytes(broken)), Walk())["responses"][0]["partitions"][0]["records"]
    assert records["batches"] == [] and "magic 1" in records["unreadable"]
    empty = render_body(_fetch_response(b""), Walk())["responses"][0]["partitions"][0]["records"]
    assert empty == {"sizeInBytes": 0, "batches": []}


def test_topic_ids_are_shown_as_kafka_prints_them_and_resolved_for_filters() -> None:
    topic_id = uuid.UUID("3f2504e0-4f89-11d3-9a0c-0305e82c3301")
    request = build(load_request_schema(ApiKey.FETCH, 13), max_wait=500, max_bytes=1024, topics=[
        {"topic_id": topic_id, "partitions": [{"partition": 0, "fetch_offset": 5, "partition_max_bytes": 100}]}])
    recorder = _recorder(resolve_topic=lambda wanted: "payments" if wanted == topic_id else None)
    recorder.observe(_exchange(ApiKey.FETCH, 13, request))
    [entry] = recorder.recent(topic="payments")
    assert entry["request"]["topics"][0]["topic_id"] == kafka_uuid(topic_id) == "PyUE4E-JEdOaDAMF6CwzAQ"
    assert entry["request"]["max_wait_ms"] == 500 and entry["topics"] == ["payments"]


@pytest.mark.parametrize("api_key", list(ApiKey))
def test_every_served_api_renders_as_json(api_key: ApiKey) -> None:
    """Zero-valued bodies of every version, both directions: every kio field type has a rendering."""
    from kio.schema.index import api_key_map

    for version in sorted(schema_name_map[api_key_map[api_key]]):
        for load in (load_request_schema, load_response_schema):
            body = build(load(api_key, version))
            json.dumps(render_body(body, Walk(decode_records=True)))


def test_past_its_record_budget_the_ring_keeps_no_record_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.broker.observe import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "RING_MAX_RECORD_BYTES", 0)  # only the newest is kept whole
    records = _transactional_batch() * 2
    baseline = sys.getrefcount(records)
    recorder = _recorder()
    request = _produce("t", records)
    response = _fetch_response(records)
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, request))
    recorder.observe(_exchange(ApiKey.FETCH, 12, None, response))
    del request, response
    gc.collect()
    assert sys.getrefcount(records) > baseline  # the fetch, newest, still holds them
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("t", _transactional_batch())))
    gc.collect()
    assert sys.getrefcount(records) == baseline
    produce, fetch, _newest = recorder.recent()
    assert produce["request"]["topic_data"][0]["partition_data"][0]["records"]["batches"][1]["baseOffset"] == 0
    assert len(fetch["response"]["responses"][0]["partitions"][0]["records"]["batches"]) == 2


def test_a_reduced_exchange_keeps_no_view_of_a_records_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.broker.observe import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "RING_MAX_RECORD_BYTES", 0)
    buffer = bytearray(_transactional_batch())
    baseline = sys.getrefcount(buffer)
    recorder = _recorder()
    view = memoryview(buffer)
    recorder.observe(_exchange(ApiKey.FETCH, 12, None, _fetch_response(view)))  # type: ignore[arg-type]
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("t", _transactional_batch())))
    view.release()  # raises BufferError if the ring still held a view of it
    del view
    assert sys.getrefcount(buffer) == baseline
    [entry, _newest] = recorder.recent()
    assert entry["response"]["responses"][0]["partitions"][0]["records"]["batches"][0]["producerId"] == 4000


def test_a_fetch_answer_sent_from_a_segment_lets_go_of_it_when_the_segment_is_deleted(tmp_path: Path) -> None:
    log = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(segment_bytes=REGION_MIN_BYTES), 1_700_000_000_000)
    log.open(recovery_point=0, log_start_offset=0, clean=True)
    for index in range(2):
        log.append(build_batch([Record(None, bytes([index]) * REGION_MIN_BYTES, (), 1_700_000_000_000)]),
                   1_700_000_000_000)  # a segment each
    first_segment = str(log.segments[0].log_path)
    region = log.read(0, 1 << 20, as_region=True).records
    assert isinstance(region, FileRegion)
    recorder = _recorder()
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("t", _transactional_batch())))
    recorder.observe(_exchange(ApiKey.FETCH, 12, None, _fetch_response(region)))  # type: ignore[arg-type]
    del region
    gc.collect()
    assert first_segment in open_descriptor_targets()  # the newest exchange is kept whole, its region with it
    log.delete_records_before(1)  # retention's way: no exchange follows
    gc.collect()
    assert not any(target.startswith(first_segment) for target in open_descriptor_targets())
    _produce_entry, fetch = recorder.recent()
    [summary] = fetch["response"]["responses"][0]["partitions"][0]["records"]["batches"]
    assert summary["baseOffset"] == 0 and summary["lastOffset"] == 0  # summarised from the file before it closed
    log.close()


def test_a_fetch_answer_whose_closing_segment_cannot_be_read_is_kept_without_its_response(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = PartitionLog(tmp_path / "t-0", "t", 0, LogConfig(), 1_700_000_000_000)
    log.open(recovery_point=0, log_start_offset=0, clean=True)
    log.append(build_batch([Record(None, b"r" * REGION_MIN_BYTES, (), 1_700_000_000_000)]), 1_700_000_000_000)
    path = str(log.segments[0].log_path)
    region = log.read(0, 1 << 20, as_region=True).records
    assert isinstance(region, FileRegion)
    recorder = _recorder()
    recorder.observe(_exchange(ApiKey.FETCH, 12, None, _fetch_response(region), correlation_id=8))  # type: ignore[arg-type]
    del region
    gc.collect()

    def failing_read(self: FileRegion, position: int, size: int) -> bytes:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(FileRegion, "pread", failing_read)
    log.close()  # goes on, the recorder's failure logged
    gc.collect()
    assert path not in open_descriptor_targets()
    [entry] = recorder.recent()
    assert entry["correlation_id"] == 8 and entry["response"] is None


def test_the_ring_is_bounded_and_filters_queries() -> None:
    recorder = _recorder(ring_size=3)
    metadata = build(load_request_schema(ApiKey.METADATA, 12), topics=[{"name": "a"}])
    for correlation_id in range(1, 5):
        recorder.observe(_exchange(ApiKey.METADATA, 12, metadata, client_id="meta", correlation_id=correlation_id))
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("b", _transactional_batch()), client_id="prod",
                               correlation_id=5))
    assert [e["correlation_id"] for e in recorder.recent()] == [3, 4, 5]
    assert [e["correlation_id"] for e in recorder.recent(1)] == [5]
    assert [e["correlation_id"] for e in recorder.recent(api="Metadata")] == [3, 4]
    assert [e["correlation_id"] for e in recorder.recent(api="METADATA", limit=1)] == [4]
    assert [e["correlation_id"] for e in recorder.recent(client_id="prod")] == [5]
    assert [e["correlation_id"] for e in recorder.recent(topic="a")] == [3, 4]
    assert [e["correlation_id"] for e in recorder.recent(topic="b", api="Produce")] == [5]
    assert recorder.recent(topic="b", api="Metadata") == []
    with pytest.raises(ValueError, match="NoSuchApi"):
        recorder.recent(api="NoSuchApi")


def test_the_ring_is_bounded_in_wire_bytes_too(monkeypatch: pytest.MonkeyPatch) -> None:
    from minikafka.broker.observe import recorder as recorder_module

    monkeypatch.setattr(recorder_module, "RING_MAX_WIRE_BYTES", 1000)
    recorder = _recorder(ring_size=100)
    metadata = build(load_request_schema(ApiKey.METADATA, 12), topics=[{"name": "a"}])
    for correlation_id in range(1, 6):  # 100 + 50 bytes each (see _exchange): 6 fit in 1000
        recorder.observe(_exchange(ApiKey.METADATA, 12, metadata, correlation_id=correlation_id))
    big = _exchange(ApiKey.METADATA, 12, metadata, correlation_id=6)
    big.response_bytes = 600
    recorder.observe(big)
    assert [e["correlation_id"] for e in recorder.recent()] == [4, 5, 6]
    # An exchange holding record batches is kept whole, counted against RING_MAX_RECORD_BYTES instead.
    monkeypatch.setattr(recorder_module, "RING_MAX_RECORD_BYTES", 6000)
    batches = _transactional_batch() * 50
    produces = []
    for correlation_id in (7, 8):
        produce = _exchange(ApiKey.PRODUCE, 9, _produce("t", batches), correlation_id=correlation_id)
        produce.request_bytes = 100 + len(batches)  # 5150 of the 6000 each
        produces.append(produce)
    recorder.observe(produces[0])
    assert [e["correlation_id"] for e in recorder.recent()] == [4, 5, 6, 7]
    assert recorder.ring[-1].exchange is produces[0]
    # The second passes the record budget: the first is reduced to batch summaries (150 wire bytes left),
    # which then count against the 1000 of RING_MAX_WIRE_BYTES and push out 4.
    recorder.observe(produces[1])
    assert [e["correlation_id"] for e in recorder.recent()] == [5, 6, 7, 8]
    reduced, whole = recorder.ring[2], recorder.ring[3]
    assert (reduced.whole, reduced.weight, whole.whole, whole.exchange is produces[1]) == (False, 150, True, True)
    assert reduced.exchange.request is not produces[0].request
    rendered = {e["correlation_id"]: e["request"] for e in recorder.recent()}
    assert rendered[7] == rendered[8]  # the same batch summaries, from the snapshot and from the bytes
    nine = _exchange(ApiKey.PRODUCE, 9, _produce("t", batches), correlation_id=9)
    nine.request_bytes = 100 + len(batches)
    recorder.observe(nine)
    assert [e["correlation_id"] for e in recorder.recent()] == [6, 7, 8, 9]
    huge = _exchange(ApiKey.METADATA, 12, metadata, correlation_id=8)
    huge.response_bytes = 5000
    recorder.observe(huge)
    assert [e["correlation_id"] for e in recorder.recent()] == [8]  # the newest is always kept


def test_closed_exchanges_say_why() -> None:
    recorder = _recorder()
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, outcome=CLOSED, close_reason="fault 1: connection dropped"))
    [entry] = recorder.recent()
    assert entry["outcome"] == "closed" and entry["close_reason"] == "fault 1: connection dropped"
    assert entry["request"] is None and entry["response"] is None and entry["topics"] == []


def test_trace_file_applies_its_filters_and_decodes_records(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    recorder = _recorder(trace_file=str(path), decode_records=True, apis=("Produce",), client_ids=("app",),
                         topics=("keep",))
    batch = _transactional_batch()
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("keep", batch), client_id="app", correlation_id=1))
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("other", batch), client_id="app", correlation_id=2))
    recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("keep", batch), client_id="else", correlation_id=3))
    recorder.observe(_exchange(ApiKey.METADATA, 12, build(load_request_schema(ApiKey.METADATA, 12),
                                                          topics=[{"name": "keep"}]), client_id="app"))
    recorder.close()
    [line] = [json.loads(text) for text in path.read_text().splitlines()]
    assert line["correlation_id"] == 1
    [traced] = line["request"]["topic_data"][0]["partition_data"][0]["records"]["batches"]
    assert [record["value"] for record in traced["records"]] == ["value 0", "value 1", "value 2"]
    assert len(recorder.recent()) == 4  # the ring keeps all, with batch summaries only
    [kept] = recorder.recent(1, api="Produce")[0]["request"]["topic_data"][0]["partition_data"][0]["records"][
        "batches"]
    assert "records" not in kept


def test_subscriptions() -> None:
    async def run() -> None:
        recorder = _recorder(ring_size=0)
        produce_only = recorder.subscribe(api="Produce", topic="t")
        everything = recorder.subscribe(maxsize=2)
        metadata = build(load_request_schema(ApiKey.METADATA, 12), topics=[{"name": "t"}])
        recorder.observe(_exchange(ApiKey.METADATA, 12, metadata, correlation_id=1))
        recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("u", _transactional_batch()), correlation_id=2))
        recorder.observe(_exchange(ApiKey.PRODUCE, 9, _produce("t", _transactional_batch()), correlation_id=3))
        assert (await produce_only.get())["correlation_id"] == 3
        # A reader that fell behind loses the oldest and is told how many.
        assert everything.dropped == 1
        assert [(await everything.get())["correlation_id"] for _ in range(2)] == [2, 3]
        waiting = asyncio.ensure_future(everything.get())
        await asyncio.sleep(0)
        recorder.close()
        with pytest.raises(TraceClosed):
            await asyncio.wait_for(waiting, 5)
        with pytest.raises(TraceClosed):
            await produce_only.get()
        assert recorder.recent() == []

    asyncio.run(run())


def _registry_request(path: str, status: int = 200, error_code: int | None = None) -> HttpExchange:
    return HttpExchange("SchemaRegistry", 1_700_000_000_123, "127.0.0.1:40001", "GET", path, "GET /subjects",
                        status, error_code, 250_000)


def test_schema_registry_requests_share_the_ring_filters_subscribers_and_file(tmp_path: Path) -> None:
    async def run() -> None:
        trace_file = tmp_path / "trace.jsonl"
        recorder = _recorder(ring_size=3, trace_file=str(trace_file), apis=("SchemaRegistry",))
        registry_only = recorder.subscribe(api="SchemaRegistry")
        metadata = build(load_request_schema(ApiKey.METADATA, 12), topics=[{"name": "a"}])
        recorder.observe(_exchange(ApiKey.METADATA, 12, metadata, correlation_id=1))
        recorder.observe_http(_registry_request("/subjects"))
        recorder.observe_http(_registry_request("/subjects/x/versions/1", 404, 40401))
        recorder.observe(_exchange(ApiKey.METADATA, 12, metadata, correlation_id=2))
        # Kafka entries look as they always did; registry entries are told apart by their api.
        kafka, registry = recorder.recent(api="Metadata"), recorder.recent(api="SchemaRegistry")
        assert [e["correlation_id"] for e in kafka] == [2] and "request_id" not in kafka[0]
        assert registry[-1] == {
            "time": "2023-11-14T22:13:20.123Z", "time_ms": 1_700_000_000_123, "api": "SchemaRegistry",
            "request_id": 2, "peer": "127.0.0.1:40001", "method": "GET", "path": "/subjects/x/versions/1",
            "route": "GET /subjects", "status": 404, "error_code": 40401, "latency_ms": 0.25, "topics": [],
            "errors": ["40401"]}
        assert [e["api"] for e in recorder.recent()] == ["SchemaRegistry", "SchemaRegistry", "Metadata"]  # ring 3
        assert recorder.recent(topic="a") == [kafka[0]] and recorder.recent(client_id="c") == kafka
        assert [(await registry_only.get())["status"] for _ in range(2)] == [200, 404]
        recorder.close()
        lines = [json.loads(line) for line in trace_file.read_text().splitlines()]
        assert [(line["api"], line["path"]) for line in lines] == [
            ("SchemaRegistry", "/subjects"), ("SchemaRegistry", "/subjects/x/versions/1")]

    asyncio.run(run())


def test_iso_time() -> None:
    assert iso_time(0) == "1970-01-01T00:00:00.000Z"
    assert iso_time(1_795_452_956_007) == "2026-11-23T16:55:56.007Z"
