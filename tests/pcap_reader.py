"""A pcap reader for the tests of `--pcap`, written from the formats (libpcap, IPv4, IPv6, TCP) and not
from broker/observe/pcap.py, so the capture is checked by a second parse besides tshark's."""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass, field
from pathlib import Path

FIN, SYN, ACK = 0x01, 0x02, 0x10


@dataclass(frozen=True)
class Segment:
    time_us: int
    version: int  # 4 or 6
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    window: int
    options: bytes
    payload: bytes
    ip_checksum_ok: bool  # always True for IPv6, which has no header checksum
    tcp_checksum_ok: bool


@dataclass
class Flow:
    """One direction of one TCP connection: its segments and its bytes reassembled by sequence number."""

    segments: list[Segment] = field(default_factory=list)

    def stream(self) -> bytes:
        """The payload in sequence order; raises if a byte is missing, repeated or out of order."""
        first = self.segments[0]
        assert first.flags & SYN, "a flow starts with its SYN"
        expected = (first.seq + 1) & 0xFFFF_FFFF
        data = bytearray()
        for segment in self.segments[1:]:
            if segment.payload:
                assert segment.seq == expected, f"seq {segment.seq}, expected {expected}"
                data += segment.payload
                expected = (expected + len(segment.payload)) & 0xFFFF_FFFF
            if segment.flags & FIN:
                assert segment.seq == expected
        return bytes(data)

    def frames(self, *, cut_short_ok: bool = False) -> list[bytes]:
        """The Kafka frames of the stream, size prefix removed; the stream must end on a frame boundary
        unless `cut_short_ok` (a capture still being written), which drops a last incomplete frame."""
        data, frames, offset = self.stream(), [], 0
        while offset < len(data):
            if cut_short_ok and len(data) - offset < 4:
                break
            (size,) = struct.unpack_from(">i", data, offset)
            assert size > 0
            if size > len(data) - offset - 4:
                assert cut_short_ok, "a frame cut short"
                break
            frames.append(data[offset + 4:offset + 4 + size])
            offset += 4 + size
        return frames


def _checksum(data: bytes) -> int:
    """RFC 1071 the slow way: 16-bit words summed with end-around carry."""
    if len(data) % 2:
        data += b"\0"
    total = 0
    for (word,) in struct.iter_unpack("!H", data):
        total += word
        total = (total & 0xFFFF) + (total >> 16)
    return total


def read_pcap(path: Path, *, cut_short_ok: bool = False) -> tuple[int, list[Segment]]:
    """The link type and every TCP segment of a classic little-endian microsecond pcap file; with
    `cut_short_ok` (a file still being written) a last incomplete record is ignored."""
    data = path.read_bytes()
    magic, major, minor, _zone, _sigfigs, _snaplen, linktype = struct.unpack_from("<IHHiIII", data, 0)
    assert (magic, major, minor) == (0xA1B2C3D4, 2, 4)
    offset, segments = 24, []
    while offset < len(data):
        if cut_short_ok and len(data) - offset < 16:
            break
        seconds, micros, captured, original = struct.unpack_from("<IIII", data, offset)
        assert captured == original, "nothing is truncated"
        packet = data[offset + 16:offset + 16 + captured]
        if len(packet) < captured:
            assert cut_short_ok, "a record cut short"
            break
        offset += 16 + captured
        segments.append(_segment(seconds * 1_000_000 + micros, packet))
    return linktype, segments


def _segment(time_us: int, packet: bytes) -> Segment:
    version = packet[0] >> 4
    if version == 4:
        header_bytes = (packet[0] & 0x0F) * 4
        total_length, protocol = struct.unpack_from("!H", packet, 2)[0], packet[9]
        assert total_length == len(packet)
        src, dst = packet[12:16], packet[16:20]
        ip_ok = _checksum(packet[:header_bytes]) == 0xFFFF
        pseudo = src + dst + struct.pack("!BBH", 0, protocol, total_length - header_bytes)
    else:
        assert version == 6
        header_bytes = 40
        payload_length, protocol = struct.unpack_from("!HB", packet, 4)
        assert payload_length + 40 == len(packet)
        src, dst = packet[8:24], packet[24:40]
        ip_ok = True
        pseudo = src + dst + struct.pack("!IxxxB", payload_length, protocol)
    assert protocol == 6
    tcp = packet[header_bytes:]
    sport, dport, seq, ack, offset_byte, flags, window = struct.unpack_from("!HHIIBBH", tcp, 0)
    tcp_header_bytes = (offset_byte >> 4) * 4
    return Segment(time_us, version, str(ipaddress.ip_address(src)), str(ipaddress.ip_address(dst)), sport, dport,
                   seq, ack, flags, window, tcp[20:tcp_header_bytes], tcp[tcp_header_bytes:], ip_ok,
                   _checksum(pseudo + tcp) == 0xFFFF)


def flows(segments: list[Segment]) -> dict[tuple[str, int, str, int], Flow]:
    """Segments by direction: (source address, source port, destination address, destination port)."""
    by_direction: dict[tuple[str, int, str, int], Flow] = {}
    for segment in segments:
        by_direction.setdefault((segment.src, segment.sport, segment.dst, segment.dport), Flow()).segments.append(
            segment)
    return by_direction
