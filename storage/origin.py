"""Who wrote a batch, which decides the checks it gets on append (Kafka's AppendOrigin).

- CLIENT: a producer's Produce. Everything is checked: keys on compacted topics, timestamps,
  retried batches (answered with the first append's offsets), producer epoch and sequence, and
  that a producer with an open transaction sends only transactional batches.
- COORDINATOR: records a coordinator built itself (`__transaction_state`, `__consumer_offsets`,
  a producer's transactional offset commits). Only the producer epoch and the transactional state
  are checked, as in Kafka's ProducerAppendInfo: sequences belong to the client's batches, and a
  coordinator never retries an append. The key and timestamp checks are skipped: the broker built
  the records with their keys and its own clock, so they cannot fail (Kafka runs them anyway).
- REPLICATION: batches already in the log, replayed to rebuild producer state (Kafka's log
  loading uses this origin too): nothing is validated, only applied.
"""

from __future__ import annotations

from enum import Enum


class AppendOrigin(Enum):
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
