import pytest
from confluent_kafka import Producer


@pytest.mark.minikafka(config={"num.partitions": 3})
def test_keys_spread_over_partitions(minikafka, unique_topic):
    producer = Producer({"bootstrap.servers": minikafka.bootstrap_servers})
    partitions = set()
    for key in (b"a", b"b", b"c", b"d", b"e", b"f"):
        producer.produce(unique_topic, b"v", key=key, on_delivery=lambda err, msg: partitions.add(msg.partition()))
    assert producer.flush(10) == 0
    assert len(partitions) > 1
