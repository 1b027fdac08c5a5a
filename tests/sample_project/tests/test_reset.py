from confluent_kafka import Producer


def test_orders_start_from_nothing(minikafka_reset):
    assert minikafka_reset.state()["topics"] == {}
    producer = Producer({"bootstrap.servers": minikafka_reset.bootstrap_servers})
    producer.produce("orders", b"order-1")
    assert producer.flush(10) == 0
    assert list(minikafka_reset.state()["topics"]) == ["orders"]
