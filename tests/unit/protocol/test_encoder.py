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
from minikafka.protocol.build import build
from minikafka.protocol.encoder import encode_entity, writer_for

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
