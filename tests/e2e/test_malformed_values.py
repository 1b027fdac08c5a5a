"""Well-framed requests carrying values a handler could not take: nulls where Kafka refuses them,
topic ids at versions that cannot look them up, a topic named a million times.

Each is answered with Kafka's error for that entry, and the same connection keeps serving.
"""

from __future__ import annotations

import struct
import uuid
from datetime import timedelta
from typing import Any

from kio.schema.create_topics.v7.request import CreatableTopic, CreatableTopicConfig, CreateTopicsRequest
from kio.schema.incremental_alter_configs.v1.request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kio.schema.metadata.v4.request import MetadataRequest as MetadataV4
from kio.schema.metadata.v11.request import MetadataRequest as MetadataV11
from kio.schema.metadata.v11.request import MetadataRequestTopic as TopicV11
from kio.schema.metadata.v12.request import MetadataRequest as MetadataV12
from kio.schema.metadata.v12.request import MetadataRequestTopic as TopicV12
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.protocol.errors import ErrorCode
from minikafka.testing import Broker

from tests.support.clients import create_topic
from tests.support.names import unique_topic
from tests.support.wire import Wire

TOPIC_RESOURCE = 2
SET, DELETE, APPEND = 0, 1, 2


def _ask(wire: Wire, correlation_id: int, request: Any) -> Any:
    wire.send(encode_request(correlation_id, request))
    corr, response = decode_response(wire.receive(), request.__api_key__, request.__version__)
    assert corr == correlation_id
    return response


def _still_serves(wire: Wire, topic: str) -> None:
    """The connection that carried the bad value answers the next request normally."""
    response = _ask(wire, 999, MetadataV12(topics=(TopicV12(name=topic, topic_id=None),),
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False))
    assert [(t.name, t.error_code) for t in response.topics] == [(topic, ErrorCode.none)]


def _create_topics_v7(*topics: CreatableTopic) -> CreateTopicsRequest:
    return CreateTopicsRequest(topics=topics, timeout=timedelta(seconds=10), validate_only=False)


def _creatable(name: str, **configs: str | None) -> CreatableTopic:
    return CreatableTopic(name=name, num_partitions=1, replication_factor=1, assignments=(),
                          configs=tuple(CreatableTopicConfig(name=k.replace("_", "."), value=v)
                                        for k, v in configs.items()))


def test_create_topics_null_config_value_is_invalid_config(broker: Broker) -> None:
    refused, good = unique_topic("nullcfg"), unique_topic("okcfg")
    wire = Wire(broker)
    try:
        response = _ask(wire, 1, _create_topics_v7(
            _creatable(refused, retention_ms="1000", segment_bytes=None, segment_ms=None),
            _creatable(good, retention_ms="1000")))
        by_name = {t.name: t for t in response.topics}
        assert by_name[refused].error_code == ErrorCode.invalid_config
        assert by_name[refused].error_message == "Null value not supported for topic configs: segment.bytes,segment.ms"
        assert by_name[good].error_code == ErrorCode.none, "one topic's null value fails only that topic"
        _still_serves(wire, good)
        absent = _ask(wire, 2, MetadataV12(topics=(TopicV12(name=refused, topic_id=None),),
                                           allow_auto_topic_creation=False,
                                           include_topic_authorized_operations=False))
        assert absent.topics[0].error_code == ErrorCode.unknown_topic_or_partition, "nothing was created"
    finally:
        wire.close()
    assert "Traceback" not in broker.logs()


def _alter(topic: str, *changes: tuple[str, int, str | None]) -> IncrementalAlterConfigsRequest:
    return IncrementalAlterConfigsRequest(
        resources=(AlterConfigsResource(
            resource_type=TOPIC_RESOURCE, resource_name=topic,
            configs=tuple(AlterableConfig(name=n, config_operation=op, value=v) for n, op, v in changes)),),
        validate_only=False)


def test_incremental_alter_configs_null_value_only_for_delete(broker: Broker) -> None:
    topic = unique_topic("iac")
    create_topic(broker.bootstrap_servers, topic, config={"retention.ms": "5000"})
    wire = Wire(broker)
    try:
        refused = _ask(wire, 1, _alter(topic, ("retention.ms", SET, None), ("cleanup.policy", APPEND, None),
                                       ("segment.ms", DELETE, None)))
        result = refused.responses[0]
        assert result.error_code == ErrorCode.invalid_request
        assert result.error_message == "Null value not supported for : retention.ms, cleanup.policy"
        deleted = _ask(wire, 2, _alter(topic, ("retention.ms", DELETE, None)))
        assert deleted.responses[0].error_code == ErrorCode.none, "a null value is how DELETE is sent"
        _still_serves(wire, topic)
    finally:
        wire.close()
    assert "Traceback" not in broker.logs()


def test_metadata_v11_null_name_is_invalid_request_and_encodable(broker: Broker) -> None:
    known = unique_topic("md11")
    create_topic(broker.bootstrap_servers, known)
    wire = Wire(broker)
    try:
        nameless, named = TopicV11(name=None, topic_id=None), TopicV11(name=known, topic_id=None)
        response = _ask(wire, 1, MetadataV11(topics=(nameless, named), allow_auto_topic_creation=True,
                                             include_topic_authorized_operations=False))
        # Kafka's getErrorResponse: the whole request fails, a null name comes back as "".
        assert [(t.name, t.error_code) for t in response.topics] == [
            ("", ErrorCode.invalid_request), (known, ErrorCode.invalid_request)]
        some_id = uuid.uuid4()
        by_id = _ask(wire, 2, MetadataV11(topics=(TopicV11(name=known, topic_id=some_id),),
                                          allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert [(t.name, t.topic_id, t.error_code) for t in by_id.topics] == [
            (known, some_id, ErrorCode.invalid_request)], "topic ids cannot be looked up before v12"
        _still_serves(wire, known)
    finally:
        wire.close()


def test_metadata_v12_by_unknown_id_is_unknown_topic_id_once(broker: Broker) -> None:
    missing = uuid.uuid4()
    wire = Wire(broker)
    try:
        response = _ask(wire, 1, MetadataV12(topics=(TopicV12(name=None, topic_id=missing),) * 3,
                                             allow_auto_topic_creation=False,
                                             include_topic_authorized_operations=False))
        assert [(t.name, t.topic_id, t.error_code) for t in response.topics] == [
            (None, missing, ErrorCode.unknown_topic_id)]
    finally:
        wire.close()


def _metadata_v4_frame(correlation_id: int, names: list[bytes], repeat: int) -> bytes:
    """A Metadata v4 frame listing `names`, the whole list `repeat` times, built by byte repetition:
    a million kio entities would take the test longer to make than the broker to answer."""
    one_pass = b"".join(struct.pack(">h", len(name)) + name for name in names)
    template = encode_request(correlation_id, MetadataV4(topics=(), allow_auto_topic_creation=False))
    # v4 body: topics array (int32 count, entries), then allow_auto_topic_creation; the header precedes.
    header = template[4:-5]
    body = struct.pack(">i", len(names) * repeat) + one_pass * repeat + b"\x00"
    return struct.pack(">i", len(header) + len(body)) + header + body


def test_metadata_dedupes_a_topic_named_a_million_times(broker: Broker) -> None:
    first, second = unique_topic("d"), unique_topic("e")
    create_topic(broker.bootstrap_servers, first)
    create_topic(broker.bootstrap_servers, second)
    wire = Wire(broker)
    try:
        wire.send(_metadata_v4_frame(7, [first.encode(), second.encode()], 500_000))
        corr, response = decode_response(wire.receive(), 3, 4)
        assert corr == 7
        assert [(t.name, t.error_code) for t in response.topics] == [
            (first, ErrorCode.none), (second, ErrorCode.none)]
        _still_serves(wire, first)
    finally:
        wire.close()
