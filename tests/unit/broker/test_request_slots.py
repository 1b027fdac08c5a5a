"""RequestSlots (broker/wire/connection.py): queued.max.requests' bound, with waiters served in arrival order."""

from __future__ import annotations

import asyncio

from minikafka.broker.wire.connection import RequestSlots

DEADLINE_S = 5.0


async def _settle() -> None:
    """Let every ready callback run: the waiters' tasks reach their await or finish."""
    for _ in range(10):
        await asyncio.sleep(0)


async def test_free_slots_are_taken_without_waiting_and_the_limit_holds() -> None:
    slots = RequestSlots(2)
    assert slots.try_take() and slots.try_take()
    assert not slots.try_take()
    slots.give_back()
    assert slots.try_take()
    assert not slots.try_take()


async def test_waiters_get_slots_in_arrival_order_and_a_new_comer_does_not_overtake_them() -> None:
    slots = RequestSlots(1)
    assert slots.try_take()
    order: list[int] = []

    async def request(number: int) -> None:
        await slots.take()
        order.append(number)

    waiting = [asyncio.create_task(request(number)) for number in range(3)]
    await _settle()
    assert order == []
    slots.give_back()
    await _settle()
    assert order == [0]
    assert not slots.try_take(), "the slot went to the oldest waiter, not to whoever asks next"
    slots.give_back()
    slots.give_back()
    await asyncio.wait_for(asyncio.gather(*waiting), DEADLINE_S)
    assert order == [0, 1, 2]
    slots.give_back()
    assert slots.try_take() and not slots.try_take()


async def test_a_cancelled_waiter_leaves_the_queue_and_a_slot_handed_to_it_passes_on() -> None:
    slots = RequestSlots(1)
    assert slots.try_take()
    first = asyncio.create_task(slots.take())
    second = asyncio.create_task(slots.take())
    third = asyncio.create_task(slots.take())
    await _settle()
    second.cancel()  # cancelled while still waiting: it leaves the queue
    await _settle()
    slots.give_back()  # handed to `first`...
    first.cancel()  # ...which is cancelled before it runs: the slot must reach `third`
    await _settle()
    assert first.cancelled() and second.cancelled()
    await asyncio.wait_for(third, DEADLINE_S)
    assert not slots.try_take(), "third holds the one slot"
    slots.give_back()
    assert slots.try_take()
