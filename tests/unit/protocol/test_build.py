"""`build` (protocol/build.py) makes the same entities as kio's own constructors, for every class kio has."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.produce.v9.response import PartitionProduceResponse, ProduceResponse, TopicProduceResponse
from minikafka.protocol.build import build

from .test_encoder import CLASSES  # every kio request and response class (and the Records strategy)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_an_entity_given_every_field_is_the_one_kio_constructs(data: st.DataObject) -> None:
    cls, label = data.draw(st.sampled_from(CLASSES))
    entity = data.draw(st.from_type(cls))
    values = {field.name: getattr(entity, field.name) for field in dataclasses.fields(entity)}
    built = build(cls, **values)
    assert type(built) is cls and built == entity, label


@pytest.mark.parametrize(("cls", "label"), CLASSES, ids=[label for _cls, label in CLASSES])
def test_fields_not_given_take_the_class_default_or_their_zero(cls: type, label: str) -> None:
    built = build(cls)
    for field in dataclasses.fields(cls):
        value = getattr(built, field.name)
        if field.default is not dataclasses.MISSING:
            assert value == field.default, (label, field.name)
        elif field.metadata.get("kafka_type") in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            assert value == 0, (label, field.name)


def test_nested_dicts_and_plain_values_are_converted_as_kio_types() -> None:
    built = build(ProduceResponse, throttle_time=5, not_a_field_of_v9=1, responses=[
        {"name": "orders", "partition_responses": [
            {"index": 2, "error_code": 6, "base_offset": 41, "log_append_time": 1_700_000_000_000}]}])
    expected = ProduceResponse(throttle_time=datetime.timedelta(milliseconds=5), responses=(TopicProduceResponse(
        name="orders", partition_responses=(PartitionProduceResponse(
            index=2, error_code=ErrorCode.not_leader_or_follower, base_offset=41,
            log_append_time=datetime.datetime(2023, 11, 14, 22, 13, 20, tzinfo=datetime.UTC), record_errors=()),)),))
    assert built == expected


def test_a_built_entity_stays_frozen() -> None:
    built: Any = build(PartitionProduceResponse, index=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.index = 2
    assert (built.index, built.error_code, built.base_offset, built.log_start_offset) == (1, ErrorCode.none, 0, -1)


def test_a_field_without_default_or_zero_must_be_given() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Odd:
        number: int = dataclasses.field(metadata={"kafka_type": "int32"})
        mystery: object = dataclasses.field(metadata={"kafka_type": "no such type"})

    with pytest.raises(TypeError, match="no zero value for field mystery"):
        build(Odd, number=1)
    assert build(Odd, mystery="given") == Odd(number=0, mystery="given")


def test_a_class_whose_fields_are_not_all_its_own_slots_is_built_by_its_constructor() -> None:
    @dataclasses.dataclass(frozen=True)
    class Base:
        error_code: ErrorCode = dataclasses.field(metadata={"kafka_type": "error_code"})

    @dataclasses.dataclass(frozen=True, slots=True)
    class Derived(Base):
        count: int = dataclasses.field(metadata={"kafka_type": "int32"}, default=7)

    assert build(Derived, error_code=3) == Derived(error_code=ErrorCode.unknown_topic_or_partition)
    assert build(Base) == Base(error_code=ErrorCode.none)
