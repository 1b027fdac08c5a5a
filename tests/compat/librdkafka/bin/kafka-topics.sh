#!/bin/sh
# kafka-topics.sh for librdkafka's test suite, which runs $KAFKA_PATH/bin/kafka-topics.sh: the same options,
# answered over the wire by `minikafka topics`. run.py sets MINIKAFKA_PYTHON to the interpreter that has minikafka.
exec "${MINIKAFKA_PYTHON:-python3}" -m minikafka.broker topics "$@"
