"""broker/observe/pcap.py without a broker: checksums, segmenting, sequence arithmetic, windows, the file, failures.

Packets are read back with tests/pcap_reader.py, a parse written from the formats, not from the writer."""

from __future__ import annotations

import asyncio
import random
import struct
from pathlib import Path

import pytest
import structlog
from minikafka.broker.observe.pcap import (
    ACK,
    FIN,
    LINKTYPE_RAW,
    MSS,
    PSH,
    SYN,
    WINDOW,
    WINDOW_SHIFT,
    PcapWriter,
    TcpConversation,
)
from minikafka.storage.clock import ManualClock

from tests.pcap_reader import Segment, _segment, flows, read_pcap

CLIENT, BROKER = ("127.0.0.1", 50123), ("127.0.0.1", 9092)


def _frame(size: int, seed: int = 0) -> bytes:
    return struct.pack(">i", size) + random.Random(seed).randbytes(size)


def _parsed(packets: list[tuple[bytes, bytes | memoryview]]) -> list[Segment]:
    return [_segment(0, headers + bytes(payload)) for headers, payload in packets]


PAYLOADS = [b"", b"\0" * 8, b"\xff" * 6, b"\xff" * 7, b"\x01",
            *(random.Random(n).randbytes(n) for n in (2, 3, 99, 1000))]


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.255.255.254", "fe80::ffff:ffff"])
@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: f"{len(p)}B")
def test_checksums_agree_with_rfc_1071_summed_word_by_word(address: str, payload: bytes) -> None:
    """The writer sums fields arithmetically; the reader (tests/pcap_reader.py) sums packed bytes the slow way."""
    rng = random.Random(len(payload))
    for _ in range(20):
        conversation = TcpConversation((address, rng.randrange(1, 65536)), (address, rng.randrange(1, 65536)),
                                       client_isn=rng.randrange(2**32), broker_isn=rng.randrange(2**32))
        segments = _parsed(conversation.open() + conversation.send(rng.random() < 0.5, payload)
                           + conversation.close())
        assert all(s.ip_checksum_ok and s.tcp_checksum_ok for s in segments)
        assert b"".join(s.payload for s in segments) == payload


def test_handshake_data_and_close_carry_exact_sequence_and_acknowledgement_numbers() -> None:
    conversation = TcpConversation(CLIENT, BROKER, client_isn=1000, broker_isn=5000)
    syn, syn_ack, ack = _parsed(conversation.open())
    assert (syn.flags, syn.seq, syn.ack, syn.sport, syn.dport) == (SYN, 1000, 0, CLIENT[1], BROKER[1])
    assert (syn_ack.flags, syn_ack.seq, syn_ack.ack) == (SYN | ACK, 5000, 1001)
    assert (ack.flags, ack.seq, ack.ack) == (ACK, 1001, 5001)
    # MSS and window scale are announced in both SYNs, and only there.
    assert syn.options == syn_ack.options == struct.pack("!BBHBBBB", 2, 4, MSS, 1, 3, 3, WINDOW_SHIFT)
    assert ack.options == b""

    (request,) = _parsed(conversation.send(True, _frame(10)))
    assert (request.flags, request.seq, request.ack, len(request.payload)) == (PSH | ACK, 1001, 5001, 14)
    (response,) = _parsed(conversation.send(False, _frame(30)))
    assert (response.flags, response.seq, response.ack, len(response.payload)) == (PSH | ACK, 5001, 1015, 34)

    fin, fin_ack, last_ack = _parsed(conversation.close())
    assert (fin.flags, fin.sport, fin.seq, fin.ack) == (FIN | ACK, BROKER[1], 5035, 1015)
    assert (fin_ack.flags, fin_ack.sport, fin_ack.seq, fin_ack.ack) == (FIN | ACK, CLIENT[1], 1015, 5036)
    assert (last_ack.flags, last_ack.sport, last_ack.seq, last_ack.ack) == (ACK, BROKER[1], 5036, 1016)
    assert all(s.ip_checksum_ok and s.tcp_checksum_ok for s in (syn, syn_ack, ack, request, response, fin))


def test_a_frame_larger_than_a_segment_is_split_into_contiguous_segments_with_push_on_the_last() -> None:
    conversation = TcpConversation(CLIENT, BROKER, client_isn=7, broker_isn=70)
    conversation.open()
    frame = _frame(3 * MSS + 1)  # with its prefix: three full segments and 5 bytes
    packets = conversation.send(True, frame)
    segments = _parsed(packets)
    assert [len(s.payload) for s in segments] == [MSS, MSS, MSS, 5]
    assert [s.seq for s in segments] == [8, 8 + MSS, 8 + 2 * MSS, 8 + 3 * MSS]
    assert [s.flags for s in segments] == [ACK, ACK, ACK, PSH | ACK]
    assert b"".join(s.payload for s in segments) == frame
    assert all(s.ip_checksum_ok and s.tcp_checksum_ok for s in segments)
    # The largest fills IPv4's 16-bit total length exactly.
    assert max(len(headers) + len(payload) for headers, payload in packets) == 0xFFFF


def test_a_frame_of_exactly_one_segment_is_one_packet() -> None:
    conversation = TcpConversation(CLIENT, BROKER, client_isn=1, broker_isn=2)
    conversation.open()
    (segment,) = _parsed(conversation.send(True, _frame(MSS - 4)))
    assert len(segment.payload) == MSS and segment.flags == PSH | ACK


def test_sequence_numbers_wrap_at_two_to_the_32() -> None:
    conversation = TcpConversation(CLIENT, BROKER, client_isn=0xFFFF_FFF0, broker_isn=0xFFFF_FFFF)
    _syn, syn_ack, ack = _parsed(conversation.open())
    assert syn_ack.ack == 0xFFFF_FFF1 and syn_ack.seq == 0xFFFF_FFFF and ack.ack == 0
    first, second = _parsed(conversation.send(True, _frame(MSS)))
    assert first.seq == 0xFFFF_FFF1 and second.seq == (0xFFFF_FFF1 + MSS) & 0xFFFF_FFFF
    (response,) = _parsed(conversation.send(False, _frame(1)))
    assert response.seq == 0 and response.ack == (0xFFFF_FFF1 + MSS + 4) & 0xFFFF_FFFF


def test_the_receiver_acknowledges_before_half_the_window_is_in_flight() -> None:
    """acks=0 produce: the client sends and the broker never answers, yet the client never fills the window."""
    conversation = TcpConversation(CLIENT, BROKER, client_isn=100, broker_isn=200)
    conversation.open()
    frame = _frame(MSS * 20)  # about 1.3 MB a frame; the window is 8 MiB
    client_acked, bare_acks = 101, 0
    for _ in range(10):
        for headers, payload in conversation.send(True, frame):
            source_port, seq, ack, flags = struct.unpack_from("!H2xIIxB", headers, 20)  # behind the IPv4 header
            if source_port == BROKER[1]:
                assert not payload and flags == ACK and ack > client_acked
                client_acked, bare_acks = ack, bare_acks + 1
            else:
                assert seq + len(payload) - client_acked <= WINDOW // 2
    assert bare_acks >= 2 * len(frame) * 10 // WINDOW - 1


def test_ipv6_peers_stay_ipv6_and_ipv4_mapped_ones_become_ipv4() -> None:
    v6 = TcpConversation(("::1", 40000), ("::1", 9092), client_isn=1, broker_isn=2)
    packets = _parsed(v6.open() + v6.send(True, _frame(MSS + 10)))
    assert {p.version for p in packets} == {6}
    assert {p.src for p in packets} == {"::1"}
    assert all(p.tcp_checksum_ok for p in packets)
    mapped = TcpConversation(("::ffff:127.0.0.1", 40000), ("::ffff:127.0.0.2", 9092), client_isn=1, broker_isn=2)
    syn = _parsed(mapped.open())[0]
    assert (syn.version, syn.src, syn.dst) == (4, "127.0.0.1", "127.0.0.2")
    scoped = TcpConversation(("fe80::1%eth0", 40000), ("fe80::2%eth0", 9092), client_isn=1, broker_isn=2)
    assert _parsed(scoped.open())[0].src == "fe80::1"


def test_the_file_holds_each_frame_exactly_once_in_order_with_the_clock_s_time(tmp_path: Path) -> None:
    clock = ManualClock(1_700_000_000_123)
    path = tmp_path / "c.pcap"
    writer = PcapWriter(str(path), clock)
    writer.connection_opened(1, CLIENT, BROKER)
    writer.connection_opened(2, ("127.0.0.1", 50124), BROKER)
    sent = {1: [_frame(100, 1), _frame(200_000, 2)], 2: [_frame(5, 3)]}
    answered = {1: [_frame(50, 4)], 2: [_frame(MSS * 2, 5)]}
    writer.frame(1, True, sent[1][0])
    clock.advance(5)
    writer.frame(2, True, sent[2][0])
    writer.frame(1, True, sent[1][1])
    writer.frame(2, False, answered[2][0])
    writer.frame(1, False, answered[1][0])
    writer.connection_closed(2)
    writer.close()  # connection 1 is still open: close() ends it with FINs too

    linktype, segments = read_pcap(path)
    assert linktype == LINKTYPE_RAW
    assert all(s.ip_checksum_ok and s.tcp_checksum_ok for s in segments)
    assert segments[0].time_us == 1_700_000_000_123_000 and segments[-1].time_us == 1_700_000_000_128_000
    by_direction = flows(segments)
    for connection, port in ((1, 50123), (2, 50124)):
        to_broker = by_direction[("127.0.0.1", port, "127.0.0.1", 9092)]
        to_client = by_direction[("127.0.0.1", 9092, "127.0.0.1", port)]
        assert to_broker.frames() == [frame[4:] for frame in sent[connection]]
        assert to_client.frames() == [frame[4:] for frame in answered[connection]]
        assert to_broker.segments[-1].flags & FIN and to_client.segments[-2].flags & FIN
    assert writer.packets == len(segments)


def test_the_buffer_is_flushed_by_size_so_a_large_frame_is_not_held_in_memory(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"
    writer = PcapWriter(str(path), ManualClock(), buffer_bytes=64 * 1024)
    writer.connection_opened(1, CLIENT, BROKER)
    writer.frame(1, True, _frame(3_000_000))
    # All but at most the buffer and one packet are on disk before close.
    assert path.stat().st_size >= 3_000_000 - 64 * 1024 - 65_535
    writer.close()
    assert path.stat().st_size > 3_000_000


def test_a_timer_flushes_what_is_buffered_when_traffic_stops(tmp_path: Path) -> None:
    path = tmp_path / "c.pcap"

    async def scenario() -> int:
        writer = PcapWriter(str(path), ManualClock(), flush_interval_s=0.05)
        header_only = path.stat().st_size
        writer.connection_opened(1, CLIENT, BROKER)
        writer.frame(1, True, _frame(100))
        assert path.stat().st_size == header_only, "small writes wait in the buffer"
        for _ in range(200):  # up to 10 s
            if path.stat().st_size > header_only:
                break
            await asyncio.sleep(0.05)
        size = path.stat().st_size
        writer.close()
        return size - header_only

    flushed = asyncio.run(scenario())
    assert flushed > 100, "the timer wrote the handshake and the frame"
    _linktype, segments = read_pcap(path)
    assert flows(segments)[("127.0.0.1", 50123, "127.0.0.1", 9092)].frames() == [_frame(100)[4:]]


def test_a_failing_write_is_logged_once_and_turns_the_capture_off(tmp_path: Path) -> None:
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full to fail writes with")
    with structlog.testing.capture_logs() as logs:
        writer = PcapWriter("/dev/full", ManualClock(), buffer_bytes=1024)
        writer.connection_opened(1, CLIENT, BROKER)
        for _ in range(5):
            writer.frame(1, True, _frame(10_000))
        writer.connection_closed(1)
        writer.close()
    failures = [entry for entry in logs if entry["log_level"] == "error"]
    assert len(failures) == 1 and "No space left" in failures[0]["error"]
    assert writer.packets == 0
