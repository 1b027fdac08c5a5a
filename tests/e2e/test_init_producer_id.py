"""KIP-360 on the wire: InitProducerId v3+ with the producer id and epoch a transactional producer
already has. librdkafka sends it to bump its epoch after an abortable error that needs one; a raw
client checks the fencing rules (Kafka's TransactionCoordinator.handleInitProducerId)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from kio.schema.init_producer_id.v3.request import InitProducerIdRequest as InitProducerIdV3
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest as InitProducerIdV4
from minikafka.protocol.codec import decode_response, encode_request
from minikafka.testing import Broker

from tests.support.clients import consume, create_topic, transactional_producer
from tests.support.waiting import poll_until

from .test_raw_protocol import Wire

INIT_PRODUCER_ID = 22
NONE, INVALID_PRODUCER_EPOCH, PRODUCER_FENCED = 0, 47, 90


def test_librdkafka_bumps_its_epoch_with_its_producer_id_after_an_abortable_error(
        minikafka: Broker, unique_topic: str) -> None:
    create_topic(minikafka.bootstrap_servers, unique_topic)
    transactional_id = f"{unique_topic}-tid"
    producer = transactional_producer(minikafka.bootstrap_servers, transactional_id)
    first_init = [exchange["response"] for exchange in minikafka.trace(api="InitProducerId")
                  if exchange["response"]["error_code"] == "NONE"][-1]
    producer_id, epoch = first_init["producer_id"], first_init["producer_epoch"]

    # UNKNOWN_PRODUCER_ID on a transactional produce is abortable and needs an epoch bump (librdkafka)
    minikafka.add_fault("Produce", "UNKNOWN_PRODUCER_ID", transactional_id=transactional_id)
    producer.begin_transaction()
    failures: list[KafkaError | None] = []
    producer.produce(unique_topic, b"lost", on_delivery=lambda error, _message: failures.append(error))
    producer.flush(15)
    assert [error.code() if error else None for error in failures] == [KafkaError.UNKNOWN_PRODUCER_ID]
    with pytest.raises(KafkaException) as commit:
        producer.commit_transaction(15)
    assert commit.value.args[0].txn_requires_abort()
    producer.abort_transaction(15)

    [bump] = poll_until(lambda: [exchange for exchange in minikafka.trace(api="InitProducerId")
                                 if exchange["request"]["producer_id"] != -1],
                        message="librdkafka's InitProducerId with its producer id")
    assert (bump["request"]["producer_id"], bump["request"]["producer_epoch"]) == (producer_id, epoch)
    assert bump["response"]["error_code"] == "NONE"
    assert (bump["response"]["producer_id"], bump["response"]["producer_epoch"]) == (producer_id, epoch + 1)

    producer.begin_transaction()
    producer.produce(unique_topic, b"kept")
    producer.commit_transaction(15)
    assert [r.value for r in consume(minikafka.bootstrap_servers, unique_topic, 1, isolation="read_committed")] == \
        [b"kept"]


class RawClient:
    def __init__(self, broker: Broker, transactional_id: str) -> None:
        self.wire = Wire(broker)
        self.correlation = 0
        self.transactional_id = transactional_id

    def init(self, producer_id: int = -1, epoch: int = -1, version: int = 4) -> Any:
        request_type = InitProducerIdV4 if version == 4 else InitProducerIdV3
        request = request_type(transactional_id=self.transactional_id, transaction_timeout=timedelta(minutes=1),
                               producer_id=producer_id, producer_epoch=epoch)
        self.correlation += 1
        self.wire.send(encode_request(self.correlation, request))
        return decode_response(self.wire.receive(), INIT_PRODUCER_ID, version)[1]


def answer(response: Any) -> tuple[int, int, int]:
    return response.error_code, response.producer_id, response.producer_epoch


def test_a_given_producer_id_and_epoch_bump_once_retry_and_fence(minikafka: Broker, unique_name: Any) -> None:
    client = RawClient(minikafka, unique_name("tid"))
    first = client.init()
    assert first.error_code == NONE
    producer_id, epoch = first.producer_id, first.producer_epoch
    assert answer(client.init(producer_id, epoch)) == (NONE, producer_id, epoch + 1)
    # the answer was lost and the producer asks again with what it had: the same epoch, no second bump
    assert answer(client.init(producer_id, epoch)) == (NONE, producer_id, epoch + 1)

    assert answer(client.init()) == (NONE, producer_id, epoch + 2), "a new instance fences the others"
    assert answer(client.init(producer_id, epoch + 1)) == (PRODUCER_FENCED, -1, -1)
    assert answer(client.init(producer_id + 1, epoch + 2)) == (PRODUCER_FENCED, -1, -1)
    # below v4 the client does not know PRODUCER_FENCED: Kafka answers INVALID_PRODUCER_EPOCH
    assert answer(client.init(producer_id, epoch + 1, version=3)) == (INVALID_PRODUCER_EPOCH, -1, -1)
    assert answer(client.init(producer_id, epoch + 2)) == (NONE, producer_id, epoch + 3)
