"""Client quotas: Kafka's precedence of quota entities, its Rate and token bucket, and its throttle times."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from minikafka.broker.config.client_quotas import (
    CLIENT_ID,
    PRODUCER_BYTE_RATE,
    USER,
    Alteration,
    ClientQuotaStore,
    entity_of,
)
from minikafka.broker.wire.quotas import ClientQuotas, HandlerTime, ThrottlingQuotaExceeded, Windows
from minikafka.protocol.errors import ErrorCode

T0 = 1_700_000_000_000
WINDOWS = Windows(11, 1000)

# Kafka's order (ClientQuotaManager's javadoc), most specific first, each as the entity the value is set on.
PRECEDENCE = [
    ((USER, "alice"), (CLIENT_ID, "app")),
    ((USER, "alice"), (CLIENT_ID, None)),
    ((USER, "alice"),),
    ((USER, None), (CLIENT_ID, "app")),
    ((USER, None), (CLIENT_ID, None)),
    ((USER, None),),
    ((CLIENT_ID, "app"),),
    ((CLIENT_ID, None),),
]


def _store(tmp_path: Path, *entities: tuple[tuple[str, str | None], ...], key: str = PRODUCER_BYTE_RATE) -> \
        ClientQuotaStore:
    store = ClientQuotaStore.load(tmp_path)
    results = store.alter([Alteration(entity_of(entity), ((key, float(1000 + index)),))
                           for index, entity in enumerate(entities)], validate_only=False)
    assert all(result.code == ErrorCode.none for result in results)
    return store


@pytest.mark.parametrize("level", range(len(PRECEDENCE)))
def test_the_most_specific_quota_applies(tmp_path: Path, level: int) -> None:
    store = _store(tmp_path, *PRECEDENCE[level:])
    limit, _tags = store.applicable(PRODUCER_BYTE_RATE, "alice", "app")
    assert limit == 1000  # the first given, i.e. the most specific left


def test_defaults_keep_one_sensor_per_name(tmp_path: Path) -> None:
    """A default client-id quota is each client id's own, not shared; a user quota is shared by its clients."""
    store = _store(tmp_path, ((CLIENT_ID, None),), ((USER, "bob"),))
    assert store.applicable(PRODUCER_BYTE_RATE, "alice", "a") == (1000, ("", "a"))
    assert store.applicable(PRODUCER_BYTE_RATE, "alice", "b") == (1000, ("", "b"))
    assert store.applicable(PRODUCER_BYTE_RATE, "bob", "a") == (1001, ("bob", ""))
    assert store.applicable(PRODUCER_BYTE_RATE, "bob", "b") == (1001, ("bob", ""))


def test_no_quota_of_the_type_records_nothing(tmp_path: Path) -> None:
    quotas = ClientQuotas.over(_store(tmp_path, ((CLIENT_ID, "app"),)), WINDOWS, WINDOWS)
    assert quotas.produce.enabled and not quotas.fetch.enabled
    assert quotas.fetch.record("u", "app", 10**9, T0) == 0
    assert not quotas.fetch.sensors


def test_throttle_time_is_kafkas(tmp_path: Path) -> None:
    """O over W against T: X = (O - T) / T * W; a first burst is measured over samples - 1 whole windows."""
    quotas = ClientQuotas.over(_store(tmp_path, ((CLIENT_ID, "app"),)), WINDOWS, WINDOWS)  # 1000 B/s
    assert quotas.produce.record("u", "app", 5_000, T0) == 0  # 5000 B over 10 s: 500 B/s
    # 20000 B over 10 s is 2000 B/s: (2000 - 1000) / 1000 * 10000 ms
    assert quotas.produce.record("u", "app", 15_000, T0) == 10_000
    # 13 s later every sample has expired: a fresh window
    assert quotas.produce.record("u", "app", 9_000, T0 + 13_000) == 0
    # the other client has no quota at all
    assert quotas.produce.record("u", "other", 10**9, T0) == 0


def test_rate_counts_elapsed_windows(tmp_path: Path) -> None:
    quotas = ClientQuotas.over(_store(tmp_path, ((CLIENT_ID, "app"),)), Windows(2, 1000), WINDOWS)
    # samples=2: at least one whole window; 2500 B at 0 and 1.5 s: 2500 B / 1.5 s
    assert quotas.produce.record("u", "app", 1000, T0) == 0
    throttle = quotas.produce.record("u", "app", 1500, T0 + 1500)
    assert throttle == round((2500 / 1.5 - 1000) / 1000 * 1500)


def test_request_quota_is_bounded_by_one_window(tmp_path: Path) -> None:
    quotas = ClientQuotas.over(_store(tmp_path, ((CLIENT_ID, "app"),), key="request_percentage"), WINDOWS, WINDOWS)
    assert quotas.request.record("u", "app", 10**6, T0) == 1000


def test_fetch_max_bytes_cap(tmp_path: Path) -> None:
    quotas = ClientQuotas.over(_store(tmp_path, ((CLIENT_ID, "app"),), key="consumer_byte_rate"), WINDOWS, WINDOWS)
    assert quotas.fetch.max_value_in_window("u", "app") == 1000 * 10
    assert quotas.fetch.max_value_in_window("u", "other") is None


def test_controller_mutations_strict_and_permissive(tmp_path: Path) -> None:
    """A token bucket of samples * window * rate (11 partitions at 1/s), refilled at the rate."""
    store = _store(tmp_path, ((CLIENT_ID, "app"),), key="controller_mutation_rate")
    store.alter([Alteration(entity_of([(CLIENT_ID, "app")]), (("controller_mutation_rate", 1.0),))],
                validate_only=False)
    quotas = ClientQuotas.over(store, WINDOWS, WINDOWS)
    mutations = quotas.controller_mutation
    assert mutations.mutation("u", "app", T0, 20, strict=True) == 0  # the bucket was full: allowed, now at -9
    with pytest.raises(ThrottlingQuotaExceeded) as refused:
        mutations.mutation("u", "app", T0, 1, strict=True)
    assert refused.value.throttle_ms == 9000
    assert mutations.mutation("u", "app", T0 + 4000, 1, strict=False) == 6000  # permissive: taken, -6
    with pytest.raises(ThrottlingQuotaExceeded):
        mutations.mutation("u", "app", T0 + 9000, 1, strict=True)
    assert mutations.mutation("u", "app", T0 + 10_000, 1, strict=True) == 0  # back at 0: allowed


def test_validation_is_kafkas(tmp_path: Path) -> None:
    store = ClientQuotaStore.load(tmp_path)
    app = entity_of([(CLIENT_ID, "app")])
    results = store.alter([
        Alteration(app, (("producer_byte_rate", 1.5),)),
        Alteration(entity_of([(USER, "")]), (("producer_byte_rate", 1.0),)),
        Alteration(entity_of([("group", "g")]), (("producer_byte_rate", 1.0),)),
        Alteration(entity_of([(USER, "u")]), (("producer_byte_rate", 1.0), ("producer_byte_rate", 2.0))),
        Alteration(entity_of([("ip", "10.0.0.1"), (USER, "u")]), (("connection_creation_rate", 1.0),)),
        Alteration(entity_of([("ip", "10.0.0.1")]), (("producer_byte_rate", 1.0),)),
        Alteration(entity_of([(CLIENT_ID, "ok")]), (("request_percentage", 12.5),)),
        Alteration((), (("request_percentage", 12.5),)),
    ], validate_only=False)
    assert [(r.code, r.message) for r in results] == [
        (ErrorCode.invalid_request, "Configuration producer_byte_rate must be a Long value"),
        (ErrorCode.invalid_request, "Empty user not supported"),
        (ErrorCode.invalid_request, "Unhandled client quota entity type: group"),
        (ErrorCode.invalid_request, "Ignoring duplicate entity ClientQuotaEntity(entries={user=u})"),
        (ErrorCode.invalid_request,
         "Invalid quota entity combination, IP entity shouldnot be combined with User or ClientId"),
        (ErrorCode.invalid_request, "Invalid configuration key producer_byte_rate"),
        (ErrorCode.none, None),
        (ErrorCode.invalid_request, "Invalid empty client quota entity"),
    ]
    assert store.quotas == {entity_of([(CLIENT_ID, "ok")]): {"request_percentage": 12.5}}
    assert ClientQuotaStore.load(tmp_path).quotas == store.quotas  # persisted


def test_validate_only_changes_nothing(tmp_path: Path) -> None:
    store = ClientQuotaStore.load(tmp_path)
    results = store.alter([Alteration(entity_of([(CLIENT_ID, "a")]), ((PRODUCER_BYTE_RATE, 5.0),))],
                          validate_only=True)
    assert results[0].code == ErrorCode.none
    assert store.quotas == {}
    assert not (tmp_path / "client-quotas.json").exists()


def test_removing_the_last_quota_turns_enforcement_off(tmp_path: Path) -> None:
    store = _store(tmp_path, ((CLIENT_ID, "app"),))
    quotas = ClientQuotas.over(store, WINDOWS, WINDOWS)
    assert quotas.any_enabled
    store.alter([Alteration(entity_of([(CLIENT_ID, "app")]), ((PRODUCER_BYTE_RATE, None),))], validate_only=False)
    assert not quotas.any_enabled and store.quotas == {}


def test_handler_time_leaves_out_the_waits() -> None:
    """What request_percentage counts: the time the handler ran, not the time it waited (a Fetch's long poll)."""
    async def handler() -> str:
        await asyncio.sleep(0.2)
        return "answered"

    async def run() -> tuple[str, int]:
        timer = HandlerTime(handler())
        return await timer, timer.nanos

    answer, nanos = asyncio.run(run())
    assert answer == "answered"
    assert 0 < nanos < 100_000_000
