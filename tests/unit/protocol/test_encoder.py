"""The compiled writers (protocol/encoder.py) write exactly kio's bytes, for every class kio has."""

from __future__ import annotations

import io
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema, load_response_schema
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_writer
from kio.static.primitive import Records
from minikafka.protocol import encoder
from minikafka.protocol.build import build, nested
from minikafka.protocol.encoder import (
    _remembered_of,
    encode_entity,
    forget_encoding,
    remember_encoding,
    writer_for,
)

st.register_type_strategy(Records, st.binary(max_size=64).map(Records))

CLASSES = [
    (load(key, version), f"{name} v{version} {kind}")
    for key, name in sorted(api_key_map.items())
    for version in sorted(schema_name_map[name])
    for load, kind in ((load_request_schema, "request"), (load_response_schema, "response"))
]


def _kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@pytest.mark.parametrize(("cls", "label"), CLASSES, ids=[label for _cls, label in CLASSES])
def test_zero_valued_bodies_encode_as_kio_does(cls: type, label: str) -> None:
    body = build(cls)
    assert encode_entity(body) == _kio_bytes(body), label


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_drawn_bodies_encode_as_kio_does(data: st.DataObject) -> None:
    cls, label = data.draw(st.sampled_from(CLASSES))
    entity = data.draw(st.from_type(cls))
    assert encode_entity(entity) == _kio_bytes(entity), label


def test_request_headers_are_left_to_kio() -> None:
    from kio.schema.request_header.v2.header import RequestHeader

    with pytest.raises(ValueError, match="request headers"):
        writer_for(RequestHeader)


def _metadata_topic(cls: type, name: str, partitions: int) -> Any:
    return build(cls, name=name, partitions=[{"partition_index": index, "leader_id": index % 3,
                                              "replica_nodes": [index % 3]} for index in range(partitions)])


def test_a_remembered_entity_is_written_from_its_encoding_wherever_it_appears() -> None:
    response_cls = load_response_schema(3, 12)  # Metadata v12
    topic_cls = nested(response_cls, "topics")
    remembered = remember_encoding(_metadata_topic(topic_cls, "orders", 5))
    fresh = _metadata_topic(topic_cls, "payments", 2)
    response = build(response_cls, topics=[remembered, fresh, remembered])
    assert encode_entity(response) == _kio_bytes(response)
    # the remembered bytes are what is written: a different encoding kept for that very object shows through
    kept = _remembered_of(topic_cls).by_id
    original = kept[id(remembered)]
    kept[id(remembered)] = (remembered, encode_entity(fresh))
    assert encode_entity(build(response_cls, topics=[remembered])) == encode_entity(build(response_cls, topics=[fresh]))
    kept[id(remembered)] = original
    # an equal entity that is another object is encoded for itself
    equal = _metadata_topic(topic_cls, "orders", 5)
    assert equal == remembered
    assert encode_entity(build(response_cls, topics=[equal])) == _kio_bytes(build(response_cls, topics=[equal]))


def test_remembered_encodings_are_bounded_per_class_oldest_forgotten_first(monkeypatch: pytest.MonkeyPatch) -> None:
    topic_cls = nested(load_response_schema(3, 9), "topics")  # a class no other test remembers
    monkeypatch.setattr(encoder, "REMEMBERED_BYTES_PER_CLASS", 2_000)
    topics = [remember_encoding(_metadata_topic(topic_cls, f"t{number}", 3)) for number in range(200)]
    kept = _remembered_of(topic_cls)
    assert 0 < kept.size <= 2_000
    assert kept.size == sum(len(encoded) for _entity, encoded in kept.by_id.values())
    assert id(topics[-1]) in kept.by_id and id(topics[0]) not in kept.by_id
    for topic in (topics[0], topics[-1]):  # forgotten or not, the bytes are the entity's
        assert encode_entity(topic) == _kio_bytes(topic)


def test_a_forgotten_entity_is_encoded_again_and_let_go() -> None:
    topic_cls = nested(load_response_schema(3, 10), "topics")  # a class no other test remembers
    kept = _remembered_of(topic_cls)
    before = kept.size
    topic = remember_encoding(_metadata_topic(topic_cls, "orders", 4))
    assert kept.by_id[id(topic)] == (topic, _kio_bytes(topic)) and kept.size == before + len(_kio_bytes(topic))
    forget_encoding(topic)
    assert id(topic) not in kept.by_id and kept.size == before
    assert encode_entity(topic) == _kio_bytes(topic)
    forget_encoding(topic)  # twice, or never remembered: nothing to do
    forget_encoding(_metadata_topic(topic_cls, "other", 1))
    assert kept.size == before
