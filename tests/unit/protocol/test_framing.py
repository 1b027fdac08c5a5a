"""FrameReceiver: whole frames in order however the socket splits them; sizes outside (0, max] refused
before any allocation; memory held never far ahead of what the client sent."""

from __future__ import annotations

import asyncio
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from minikafka.protocol.framing import BadFrameSize, FrameReceiver, encode_frame


class _Transport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.paused = False
        self.pauses = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default

    def pause_reading(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume_reading(self) -> None:
        self.paused = False


def _receiver(max_bytes: int = 1 << 24, limit: int = 64 * 1024) -> tuple[FrameReceiver, _Transport]:
    receiver = FrameReceiver(max_bytes, limit=limit)
    transport = _Transport()
    receiver.connection_made(transport)
    return receiver, transport


def _feed(receiver: FrameReceiver, data: bytes, chunk: int) -> None:
    """What the event loop does with the socket: fill the buffer the protocol hands out, report it."""
    while data:
        buffer = receiver.get_buffer(-1)
        assert len(buffer) > 0
        count = min(len(buffer), len(data), chunk)
        buffer[:count] = data[:count]
        receiver.buffer_updated(count)
        data = data[count:]


async def _drain(receiver: FrameReceiver) -> list[bytes]:
    frames = []
    while (frame := await receiver.read_frame()) is not None:
        frames.append(bytes(frame))
    return frames


@settings(max_examples=40, deadline=None)
@given(bodies=st.lists(st.one_of(st.binary(min_size=1, max_size=300),
                                 # around the first buffer's size and the small-frame bound
                                 st.integers(3 * 1024, 17 * 1024).map(lambda size: bytes([size % 251]) * size),
                                 st.integers(16 * 1024, 80 * 1024).map(lambda size: b"k" * size)),
                       max_size=8),
       chunk=st.sampled_from([5, 1000, 4096, 65536, 1 << 20]))
def test_frames_arrive_whole_and_in_order_however_the_stream_is_split(bodies: list[bytes], chunk: int) -> None:
    async def run() -> list[bytes]:
        receiver, _ = _receiver(limit=1 << 30)
        _feed(receiver, b"".join(encode_frame(body) for body in bodies), chunk)
        receiver.eof_received()
        return await _drain(receiver)

    assert asyncio.run(run()) == bodies


async def test_frames_before_a_bad_size_are_read_then_it_raises() -> None:
    receiver, transport = _receiver(max_bytes=100)
    _feed(receiver, encode_frame(b"one") + struct.pack(">i", 101) + b"x" * 10, 4096)
    assert await receiver.read_frame() == b"one"
    with pytest.raises(BadFrameSize):
        await receiver.read_frame()
    assert transport.paused  # nothing more is read from a connection about to be closed


async def test_what_arrives_after_a_bad_size_is_let_go_by_every_receiver() -> None:
    """Bytes already on their way when reading paused are read into a buffer all receivers share (never
    read back), not kept: each stopped receiver still raises, with nothing queued after its bad size."""
    stopped = [_receiver(max_bytes=100)[0] for _ in range(2)]
    for receiver in stopped:
        _feed(receiver, encode_frame(b"one") + struct.pack(">i", 101), 4096)
    first, second = (receiver.get_buffer(-1) for receiver in stopped)
    assert first.obj is second.obj  # one buffer for all: an idle connection does not carry its own
    for number, receiver in enumerate(stopped):
        _feed(receiver, bytes([number]) * 10_000 + encode_frame(b"two"), 1000)
        assert receiver.queued_bytes == 3  # "one" alone: nothing after the bad size was kept
    for receiver in stopped:
        assert await receiver.read_frame() == b"one"
        with pytest.raises(BadFrameSize):
            await receiver.read_frame()


@pytest.mark.parametrize("size", [0, -1, 101, 2**31 - 1])
async def test_bad_sizes_are_refused(size: int) -> None:
    receiver, _ = _receiver(max_bytes=100)
    _feed(receiver, struct.pack(">i", size) + b"x" * 10, 4096)
    with pytest.raises(BadFrameSize):
        await receiver.read_frame()


async def test_a_torn_frame_raises() -> None:
    receiver, _ = _receiver()
    _feed(receiver, struct.pack(">i", 10) + b"abc", 4096)
    receiver.eof_received()
    with pytest.raises(asyncio.IncompleteReadError):
        await receiver.read_frame()


async def test_a_torn_big_frame_raises() -> None:
    receiver, _ = _receiver()
    _feed(receiver, struct.pack(">i", 200_000) + b"a" * 100_000, 65536)
    receiver.connection_lost(None)
    with pytest.raises(asyncio.IncompleteReadError):
        await receiver.read_frame()


async def test_a_lost_connection_raises_its_error() -> None:
    receiver, _ = _receiver()
    receiver.connection_lost(ConnectionResetError("reset"))
    with pytest.raises(ConnectionResetError):
        await receiver.read_frame()


async def test_a_claimed_size_reserves_memory_only_as_bytes_arrive() -> None:
    receiver, _ = _receiver(max_bytes=100 * 1024 * 1024)
    _feed(receiver, struct.pack(">i", 100 * 1024 * 1024) + b"z" * 100_000, 65536)
    held = len(receiver.get_buffer(-1))
    assert held <= 1024 * 1024  # not the 100 MiB the prefix claims
    _feed(receiver, b"z" * 3_000_000, 1 << 20)
    assert len(receiver.get_buffer(-1)) <= 2 * 3_100_000


async def test_reading_pauses_past_the_limit_and_resumes_as_frames_are_taken() -> None:
    receiver, transport = _receiver(limit=1000)
    _feed(receiver, b"".join(encode_frame(struct.pack(">hh", 0, 9) + b"p" * 596) for _ in range(2)), 65536)
    assert transport.paused
    assert receiver.next_api_key() == 0  # Produce
    assert await receiver.read_frame() is not None
    assert not transport.paused
    assert await receiver.read_frame() is not None
    assert receiver.next_api_key() is None


async def test_a_waiting_reader_wakes_when_a_frame_arrives() -> None:
    receiver, _ = _receiver()
    reading = asyncio.ensure_future(receiver.read_frame())
    await asyncio.sleep(0)
    assert not reading.done()
    _feed(receiver, encode_frame(b"late"), 4096)
    assert await asyncio.wait_for(reading, 5) == b"late"


async def test_a_frame_bigger_than_its_first_buffer_arrives_intact() -> None:
    receiver, _ = _receiver()
    body = bytes(range(256)) * (10 * 1024 + 7)  # 2.5 MiB: the buffer grows twice
    _feed(receiver, encode_frame(body) + encode_frame(b"next"), 65536)
    assert await receiver.read_frame() == body
    assert await receiver.read_frame() == b"next"


async def test_a_connection_reads_through_a_small_buffer_until_its_client_sends_more() -> None:
    receiver, _ = _receiver()
    first = len(receiver.get_buffer(-1))
    assert first <= 4096  # an idle or admin client's connection holds no 64 KiB buffer
    _feed(receiver, encode_frame(b"m" * 100) * 3, 1 << 20)
    assert len(receiver.get_buffer(-1)) <= first  # small requests fit
    _feed(receiver, encode_frame(b"n" * 9000), 1 << 20)  # a small frame bigger than that buffer
    assert len(receiver.get_buffer(-1)) >= 32 * 1024
    receiver.eof_received()
    assert await _drain(receiver) == [b"m" * 100] * 3 + [b"n" * 9000]
