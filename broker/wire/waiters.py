"""Wake long-polling fetches when data arrives, instead of polling the logs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

TopicPartition = tuple[str, int]


class AppendWaiters:
    """Per-partition wake-ups: a fetch waits on the partitions it reads; appends notify them."""

    def __init__(self) -> None:
        self._waiting: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._closed = False

    def close(self) -> None:
        """On shutdown: parked fetches answer now with what they have and later ones do not wait, so a
        consumer's long poll (fetch.max.wait.ms, 500 ms by default) does not hold the stop. Kafka drops
        its purgatory's fetches unanswered when its socket server stops; an answer is no worse."""
        self._closed = True
        for futures in self._waiting.values():
            for future in futures:
                if not future.done():
                    future.set_result(None)

    def wake_all(self) -> None:
        """A broker reset: every parked fetch answers now, from the state after the reset."""
        for tp in list(self._waiting):
            self.notify(tp)

    def notify(self, tp: TopicPartition) -> None:
        futures = self._waiting.pop(tp, None)
        if futures:
            for future in futures:
                if not future.done():
                    future.set_result(None)

    async def wait_any(self, partitions: Iterable[TopicPartition], timeout_s: float) -> bool:
        """Wait until one of `partitions` gets an append or the timeout passes; True if woken by an
        append, False on the timeout or a shutdown."""
        if timeout_s <= 0 or self._closed:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(partitions)
        for tp in keys:
            self._waiting.setdefault(tp, set()).add(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return not self._closed
        except TimeoutError:
            return False
        finally:
            for tp in keys:
                waiting = self._waiting.get(tp)
                if waiting is not None:
                    waiting.discard(future)
                    if not waiting:
                        del self._waiting[tp]
            if not future.done():
                future.cancel()
