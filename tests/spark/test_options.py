"""Option parsing and offset planning of minikafka.pipeline, without a SparkSession or a broker."""

from __future__ import annotations

import re

import pytest
from minikafka.pipeline.offsets import OffsetRange, from_json, plan_ranges, rate_limit, to_json
from minikafka.pipeline.options import OptionError, SinkOptions, SourceOptions, parse_offsets

pytestmark = pytest.mark.spark

BOOTSTRAP = {"kafka.bootstrap.servers": "127.0.0.1:9092"}


def test_source_defaults_follow_spark() -> None:
    stream = SourceOptions.parse({**BOOTSTRAP, "subscribe": "a, b"}, streaming=True)
    assert stream.subscribe == ("a", "b") and stream.starting == "latest" and stream.read_committed
    assert stream.config == {"bootstrap.servers": "127.0.0.1:9092", "isolation.level": "read_committed"}
    batch = SourceOptions.parse({**BOOTSTRAP, "subscribepattern": "t-.*", "kafka.isolation.level": "read_uncommitted",
                                 "kafka.client.id": "me"}, streaming=False)
    assert batch.pattern == "t-.*" and batch.starting == "earliest" and batch.ending == "latest"
    assert not batch.read_committed and batch.config["client.id"] == "me"


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
    (BOOTSTRAP, "exactly one of the options subscribe and subscribePattern"),
    ({**BOOTSTRAP, "subscribe": "a", "subscribepattern": "b"}, "exactly one"),
    ({**BOOTSTRAP, "subscribe": "a", "kafka.enable.auto.commit": "true"}, "set by the connector"),
    ({**BOOTSTRAP, "subscribe": "a", "kafka.isolation.level": "serializable"}, "read_committed or read_uncommitted"),
    ({**BOOTSTRAP, "subscribe": "a", "maxoffsetspertrigger": "0"}, "must be positive"),
    ({**BOOTSTRAP, "subscribe": "a", "startingoffsets": "{\"a\": 5}"}, "topic -> {partition: offset}"),
    ({**BOOTSTRAP, "subscribe": "a", "endingoffsets": "latest"}, "batch queries only"),
])
def test_bad_source_options_name_the_option(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=re.escape(message)):
        SourceOptions.parse(options, streaming=True)


def test_offsets_option_json() -> None:
    assert parse_offsets('{"t": {"0": -2, "1": 7}}', name="x", default="latest") == {"t": {"0": -2, "1": 7}}
    with pytest.raises(OptionError, match="not allowed"):
        parse_offsets('{"t": {"0": -2}}', name="endingOffsets", default="latest", allow_earliest=False)
    with pytest.raises(OptionError, match="not allowed"):
        parse_offsets('{"t": {"0": -3}}', name="startingOffsets", default="latest")


def test_sink_options() -> None:
    with pytest.raises(OptionError, match=r"sink\.transactionalIdPrefix is required"):
        SinkOptions.parse({**BOOTSTRAP, "topic": "out"}, streaming=True)
    with pytest.raises(OptionError, match=r"topic or sink\.markerTopic"):
        SinkOptions.parse({**BOOTSTRAP, "sink.transactionalidprefix": "p"}, streaming=True)
    with pytest.raises(OptionError, match="set by the sink"):
        SinkOptions.parse({**BOOTSTRAP, "topic": "o", "kafka.transactional.id": "x"}, streaming=False)
    sink = SinkOptions.parse({**BOOTSTRAP, "topic": "out", "sink.transactionalidprefix": "p", "sink.mode": "Driver",
                              "kafka.isolation.level": "read_committed"}, streaming=True)
    assert (sink.mode, sink.prefix, sink.marker_topic) == ("driver", "p", "out")
    assert sink.config == {"bootstrap.servers": "127.0.0.1:9092", "partitioner": "murmur2_random"}
    first = SinkOptions.parse({**BOOTSTRAP, "topic": "out"}, streaming=False)
    second = SinkOptions.parse({**BOOTSTRAP, "topic": "out"}, streaming=False)
    assert first.prefix != second.prefix, "each batch write gets its own transactional ids"


def test_rate_limit_splits_exactly_in_proportion() -> None:
    start = {("t", 0): 0, ("t", 1): 100, ("u", 0): 5}
    latest = {("t", 0): 1000, ("t", 1): 200, ("u", 0): 6, ("u", 1): 0}
    start[("u", 1)] = 0
    limited = rate_limit(start, latest, 101)
    assert sum(limited[tp] - start[tp] for tp in start) == 101
    assert all(start[tp] <= limited[tp] <= latest[tp] for tp in start)
    # Shares 91.74, 9.17, 0.09 of 101: floors 91 + 9 + 0, the one left goes to the largest remainder.
    assert {tp: limited[tp] - start[tp] for tp in start} == {("t", 0): 92, ("t", 1): 9, ("u", 0): 0, ("u", 1): 0}
    assert rate_limit(start, latest, 10_000) == latest
    # A partition that went backwards is reported by planning, not hidden by the limit.
    assert rate_limit({("t", 0): 50, ("t", 1): 0}, {("t", 0): 10, ("t", 1): 100}, 5)[("t", 0)] == 10


def test_plan_ranges_and_json_round_trip() -> None:
    start, end = {("t", 0): 3, ("t", 1): 8, ("u", 0): 0}, {("t", 0): 9, ("t", 1): 8, ("u", 0): 2}
    assert plan_ranges(start, end, fail_on_data_loss=True) == [OffsetRange("t", 0, 3, 9), OffsetRange("u", 0, 0, 2)]
    assert to_json(end) == {"t": {"0": 9, "1": 8}, "u": {"0": 2}}
    assert from_json(to_json(end)) == end
    with pytest.raises(RuntimeError, match="failOnDataLoss"):
        plan_ranges({("t", 0): 9}, {("t", 0): 3}, fail_on_data_loss=True)
    assert plan_ranges({("t", 0): 9}, {("t", 0): 3}, fail_on_data_loss=False) == []
