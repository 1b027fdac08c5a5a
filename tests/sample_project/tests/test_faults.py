from confluent_kafka import Producer


def test_order_survives_a_leader_change(minikafka_session, unique_topic):
    minikafka_session.add_fault("Produce", "NOT_LEADER_OR_FOLLOWER", count=2, topic=unique_topic)
    producer = Producer({"bootstrap.servers": minikafka_session.bootstrap_servers, "enable.idempotence": True})
    producer.produce(unique_topic, b"order-1")
    assert producer.flush(10) == 0
    assert minikafka_session.faults() == []  # both errors were answered, and the producer retried through them
