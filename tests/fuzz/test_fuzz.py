"""The short fuzz run of `make test` (`make fuzz` runs 10^6 frames), plus checks of its corpus and mutator."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from minikafka.broker.handlers import all_handler_modules
from minikafka.broker.wire.registry import Registry
from minikafka.protocol.api_keys import ApiKey

from . import corpus
from .harness import FuzzConfig, run_fuzz
from .mutator import Mutator

FRAMES = int(os.environ.get("FUZZ_FRAMES", "4000"))
SEED = int(os.environ.get("FUZZ_SEED", "20261123"))
CLIENTS = {"confluent-kafka", "aiokafka", "kafka-python", "kcat", "kafkajs"}


def test_corpus_holds_every_client_and_every_served_api() -> None:
    frames = corpus.load()
    assert {frame.client for frame in frames} == CLIENTS | {corpus.WIRE_CLIENT}
    served = {key for key, _min, _max in Registry.from_modules(all_handler_modules()).api_versions()}
    assert {frame.api_key for frame in frames} == served
    # Our own encodings stand in only where no real client sends the API.
    from_clients = {frame.api_key for frame in frames if frame.client != corpus.WIRE_CLIENT}
    assert {frame.api_key for frame in frames if frame.client == corpus.WIRE_CLIENT}.isdisjoint(from_clients)
    # Both isolation levels of Fetch: the byte after replica id, max wait and min bytes (v4+, non-flexible).
    fetches = [f for f in frames if f.api_key == ApiKey.FETCH and 4 <= f.api_version < 12]
    assert {f.frame[f.frame.index(b"\xff\xff\xff\xff", 8) + 16] for f in fetches} >= {0, 1}
    assert corpus.CORPUS_PATH.stat().st_size < 300_000


def test_mutator_is_deterministic_and_uses_every_mutation() -> None:
    frames = corpus.load()
    mutator, again = Mutator(frames, SEED), Mutator(frames, SEED)
    mutants = [mutator.next() for _ in range(5000)]
    assert mutants == [again.next() for _ in range(5000)]
    assert mutants != [Mutator(frames, SEED + 1).next() for _ in range(5000)]
    kinds = Counter(part.split("@")[0].split("=")[0].split(" ")[0].split("[")[0]
                    for mutant in mutants for part in mutant.kind.split("+"))
    expected = {"bit_flip", "byte_set", "truncate", "extend", "int16", "int32", "varint", "insert_varint", "header",
                "splice", "sweep_int16", "sweep_int32", "sweep_varint", "size_prefix", "second_frame_cut",
                "prefix_only", "garbage", "raw_garbage", "inflate"}
    assert expected <= kinds.keys(), expected - kinds.keys()


def test_short_fuzz_run(tmp_path: Path) -> None:
    result = run_fuzz(FuzzConfig(frames=FRAMES, seed=SEED, replay_dir=tmp_path / "replays", max_restarts=3,
                                 health_every=300))
    print(result.summary())
    assert result.frames_sent == FRAMES
    assert result.health_checks >= FRAMES // 300
    assert result.crashes == 0, result.summary()
    assert result.unanswered_health_checks == 0, result.summary()
    assert result.rss_limit_exceeded == 0, result.summary()
    assert result.acked_intact, result.summary()
    assert result.acked_records == FuzzConfig().acked_records
