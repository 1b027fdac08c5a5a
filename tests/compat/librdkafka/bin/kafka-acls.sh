#!/bin/sh
# kafka-acls.sh for librdkafka's test suite, which runs $KAFKA_PATH/bin/kafka-acls.sh: the same options,
# answered over the wire by `minikafka acls`. run.py sets MINIKAFKA_PYTHON to the interpreter that has minikafka.
exec "${MINIKAFKA_PYTHON:-python3}" -m minikafka.broker acls "$@"
