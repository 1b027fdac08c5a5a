"""The Kafka wire protocol: codec (kio), records, building and splitting requests and answers."""

from minikafka.protocol.kio_import import import_kio

import_kio()  # before any module of this package imports kio (see kio_import)
