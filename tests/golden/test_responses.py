"""Golden responses: the broker's answers to fixed requests, compared byte for byte with recorded ones.

tests/golden/responses.json holds 25 request/response frames recorded by tests/golden/record_responses.py
(its docstring says how and when to re-record): ApiVersions, CreateTopics, Metadata, Produce, Fetch,
ListOffsets, FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit, OffsetFetch, LeaveGroup,
InitProducerId, AddPartitionsToTxn, EndTxn and DescribeConfigs, at the versions clients send.

Each stored frame decodes and re-encodes to its bytes (a codec change that writes differently shows here),
and the stored requests are replayed in order on one connection to a fresh broker, whose answers must be
the stored bytes, but for what differs between two runs of the same broker:

- masked (the live value is replaced by the stored one before comparing): `port`, the listener's port in
  Metadata's brokers and FindCoordinator's answers, a free port picked at each start;
- translated (a value handed out at random is mapped to the one handed out when recording, consistently:
  the same live value must stand for the same recorded one everywhere): `topic_id` (a random UUID per
  topic) and `member_id` and `leader` (JoinGroup's member ids, client id + a random UUID). Requests that
  carry them (Fetch v16's topic id, the member id of the group requests) are sent with the live values.

Nothing else is masked. Throttle times are 0; the cluster id is fixed by the broker config; timestamps
are the records' own (CreateTime) or none, and the broker runs on its manual clock, so no timer fires
between two requests; producer ids start at 0 on a fresh data directory. The live answers are checked to
re-encode to themselves too, so the comparison, made on re-encoded entities, hides no byte of them.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from minikafka.protocol.api_keys import api_name
from minikafka.protocol.codec import decode_request, decode_response, encode_request, encode_response, peek_header

from tests.golden.exchanges import Exchange, Wire, golden_broker, load

EXCHANGES = load()
MASKED_FIELDS = frozenset({"port"})
TRANSLATED_FIELDS = frozenset({"topic_id", "member_id", "leader"})
# Values that are no identifier handed out: an empty member id, a null, the zero UUID of "no topic id".
_NOT_HANDED_OUT = ("", None)


def _ids(exchanges: list[Exchange]) -> list[str]:
    return [exchange.name for exchange in exchanges]


class Translation:
    """Identifiers handed out at random, recorded value <-> live value, learnt from the answers in order."""

    def __init__(self) -> None:
        self.live_of: dict[Any, Any] = {}
        self.recorded_of: dict[Any, Any] = {}

    def translated(self, recorded: Any, live: Any) -> Any:
        """The recorded value `live` stands for (learning it when new), or `live` itself."""
        if live in self.recorded_of:
            return self.recorded_of[live]
        if live == recorded or _not_handed_out(live) or _not_handed_out(recorded) or recorded in self.live_of:
            return live  # nothing to learn; a recorded value already taken by another live one stays a difference
        self.recorded_of[live] = recorded
        self.live_of[recorded] = live
        return recorded

    def aligned(self, recorded: Any, live: Any) -> Any:
        """`live` with masked fields set to the recorded values and identifiers translated to recorded ones."""
        if not dataclasses.is_dataclass(live) or isinstance(live, type) or type(recorded) is not type(live):
            return self._aligned_value(recorded, live)
        changes = {}
        for field in dataclasses.fields(live):
            recorded_value, live_value = getattr(recorded, field.name), getattr(live, field.name)
            if field.name in MASKED_FIELDS:
                value = recorded_value
            elif field.name in TRANSLATED_FIELDS:
                value = self.translated(recorded_value, live_value)
            else:
                value = self._aligned_value(recorded_value, live_value)
            if value is not live_value:
                changes[field.name] = value
        return dataclasses.replace(live, **changes) if changes else live

    def _aligned_value(self, recorded: Any, live: Any) -> Any:
        if isinstance(live, tuple) and isinstance(recorded, tuple):
            return tuple(self.aligned(r, v) for r, v in zip(recorded, live, strict=False)) + live[len(recorded):]
        if dataclasses.is_dataclass(live) and type(recorded) is type(live):
            return self.aligned(recorded, live)
        return live

    def live_request(self, entity: Any) -> Any:
        """A recorded request's entity with every identifier learnt so far replaced by its live value."""
        if isinstance(entity, tuple):
            return tuple(self.live_request(item) for item in entity)
        if not dataclasses.is_dataclass(entity) or isinstance(entity, type):
            return entity
        changes = {}
        for field in dataclasses.fields(entity):
            value = getattr(entity, field.name)
            if field.name in TRANSLATED_FIELDS and not _not_handed_out(value) and value in self.live_of:
                changes[field.name] = self.live_of[value]
            elif dataclasses.is_dataclass(value) or isinstance(value, tuple):
                replaced = self.live_request(value)
                if replaced != value:
                    changes[field.name] = replaced
        return dataclasses.replace(entity, **changes) if changes else entity


def _not_handed_out(value: Any) -> bool:
    return value in _NOT_HANDED_OUT or getattr(value, "int", None) == 0


def _differences(recorded: Any, live: Any, path: str = "") -> list[str]:
    """Where two decoded answers differ, field by field, for the failure message."""
    if dataclasses.is_dataclass(recorded) and type(recorded) is type(live):
        return [difference for field in dataclasses.fields(recorded) for difference in
                _differences(getattr(recorded, field.name), getattr(live, field.name), f"{path}.{field.name}")]
    if isinstance(recorded, tuple) and isinstance(live, tuple) and len(recorded) == len(live):
        return [difference for index, (r, v) in enumerate(zip(recorded, live, strict=True))
                for difference in _differences(r, v, f"{path}[{index}]")]
    return [] if recorded == live else [f"{path or 'answer'}: recorded {recorded!r}, live {live!r}"]


def _reencoded_request(exchange: Exchange, translation: Translation | None = None) -> bytes:
    decoded = decode_request(exchange.request, exchange.api_key, exchange.api_version)
    body = decoded.body if translation is None else translation.live_request(decoded.body)
    return encode_request(peek_header(exchange.request).correlation_id, body, decoded.client_id)[4:]


def _reencoded_response(frame: bytes, exchange: Exchange) -> tuple[int, Any, bytes]:
    correlation_id, body = decode_response(frame, exchange.api_key, exchange.api_version)
    return correlation_id, body, encode_response(correlation_id, body)[4:]


def test_the_recording_covers_the_main_apis() -> None:
    assert {api_name(exchange.api_key) for exchange in EXCHANGES} >= {
        "API_VERSIONS", "METADATA", "PRODUCE", "FETCH", "LIST_OFFSETS", "FIND_COORDINATOR", "JOIN_GROUP",
        "SYNC_GROUP", "HEARTBEAT", "OFFSET_COMMIT", "OFFSET_FETCH", "INIT_PRODUCER_ID", "ADD_PARTITIONS_TO_TXN",
        "END_TXN", "CREATE_TOPICS", "DESCRIBE_CONFIGS"}


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_ids(EXCHANGES))
def test_a_recorded_request_re_encodes_to_its_bytes(exchange: Exchange) -> None:
    assert _reencoded_request(exchange).hex() == exchange.request.hex()


@pytest.mark.parametrize("exchange", EXCHANGES, ids=_ids(EXCHANGES))
def test_a_recorded_response_re_encodes_to_its_bytes(exchange: Exchange) -> None:
    correlation_id, _body, reencoded = _reencoded_response(exchange.response, exchange)
    assert correlation_id == peek_header(exchange.request).correlation_id
    assert reencoded.hex() == exchange.response.hex()


def test_a_fresh_broker_answers_the_recorded_requests_with_the_recorded_bytes() -> None:
    translation = Translation()
    mismatches: list[str] = []
    with golden_broker() as broker, Wire(broker.port) as wire:
        for exchange in EXCHANGES:
            live = wire.exchange(_reencoded_request(exchange, translation))
            if exchange.settle is not None:
                broker.wait_until_lso(exchange.settle.topic, exchange.settle.partition, exchange.settle.offset)
            correlation_id, live_body, live_reencoded = _reencoded_response(live, exchange)
            assert live_reencoded.hex() == live.hex(), f"{exchange.name}: the live answer does not re-encode"
            _correlation_id, recorded_body = decode_response(exchange.response, exchange.api_key,
                                                             exchange.api_version)
            aligned = translation.aligned(recorded_body, live_body)
            if encode_response(correlation_id, aligned)[4:] != exchange.response:
                found = _differences(recorded_body, aligned) or ["the bytes differ, the decoded values do not"]
                mismatches.append(f"{exchange.name}: " + "; ".join(found))
    assert mismatches == []


def test_translation_maps_each_identifier_one_way_and_back() -> None:
    translation = Translation()
    assert translation.translated("m-recorded", "m-live") == "m-recorded"
    assert translation.translated("m-recorded", "m-live") == "m-recorded"
    # Another live id where the recorded one was already matched: left as it is, so it shows as a difference.
    assert translation.translated("m-recorded", "m-other") == "m-other"
    assert translation.translated("", "") == ""
    assert translation.live_of == {"m-recorded": "m-live"}
