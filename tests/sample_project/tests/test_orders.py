from confluent_kafka import Consumer, Producer


def test_order_round_trip(minikafka_bootstrap, unique_topic, unique_group):
    producer = Producer({"bootstrap.servers": minikafka_bootstrap})
    producer.produce(unique_topic, b"order-1")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": minikafka_bootstrap, "group.id": unique_group,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([unique_topic])
    assert consumer.poll(10).value() == b"order-1"
