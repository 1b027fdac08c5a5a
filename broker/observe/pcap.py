"""`--pcap FILE`: the raw Kafka conversation as a classic libpcap file that Wireshark and tshark open.

The broker sees frames, not packets, so each connection is replayed as a synthetic TCP conversation
on its real addresses and ports: a SYN / SYN-ACK / ACK handshake when it opens, every frame (size
prefix included) as data segments of at most `MSS` bytes, and FIN / FIN-ACK / ACK when it closes.
Sequence and acknowledgement numbers are exact, IPv4 header and TCP checksums are correct, and
IPv6 peers stay IPv6 (IPv4-mapped ones become IPv4), so Wireshark's TCP analysis finds nothing to
flag and its Kafka dissector reassembles frames that span segments. Wireshark knows Kafka only on
port 9092: on another port use Analyze > Decode As (TCP port -> Kafka), or
`tshark -d tcp.port==PORT,kafka`.

Link type LINKTYPE_RAW (101): each record is a bare IP packet, the version nibble tells v4 from v6,
and there is no fake Ethernet header to invent.

The file is written through a bounded buffer, flushed when it holds `buffer_bytes` and at most
`flush_interval_s` after anything was buffered, so a broker killed with -9 leaves a capture readable
up to its last flush (at worst one record cut short, which readers report and stop at). A failed
write is logged once and turns the capture off; the broker keeps serving.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import ipaddress
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
from minikafka.storage.clock import Clock, SystemClock

_log = structlog.get_logger("minikafka.pcap")

LINKTYPE_RAW = 101
SNAPLEN = 262_144  # libpcap's default; above the largest packet written (IPv6: 40 + 20 + MSS)
# The largest TCP payload whose IPv4 packet (20-byte IP and TCP headers, no options) fits the 16-bit
# total length; IPv6 uses the same so both families segment alike.
MSS = 65_535 - 40
# Window scaling lets the advertised window exceed 64 KiB; the side that receives acknowledges before
# half of it is in flight, so Wireshark never sees a full window even for a 100 MB produce.
WINDOW_SHIFT = 7
WINDOW = 0xFFFF << WINDOW_SHIFT

FIN, SYN, PSH, ACK = 0x01, 0x02, 0x08, 0x10

_GLOBAL_HEADER = struct.Struct("<IHHiIII")
_RECORD_HEADER = struct.Struct("<IIII")
_IPV4 = struct.Struct("!BBHHHBBH4s4s")
_IPV6 = struct.Struct("!IHBB16s16s")
_TCP = struct.Struct("!HHIIBBHHH")
_TCP_HEADER_BYTES = _TCP.size
_SEQ_MASK = 0xFFFF_FFFF
# MSS and window scale, as a SYN carries them (kinds 2 and 3, padded with a NOP to 32 bits).
_SYN_OPTIONS = struct.pack("!BBHBBBB", 2, 4, MSS, 1, 3, 3, WINDOW_SHIFT)
# Version and header length, don't-fragment, TTL 64 and protocol TCP: the IPv4 header words that never change.
_IPV4_FIXED_WORDS = 0x4500 + 0x4000 + (64 << 8 | 6)

PCAP_HEADER = _GLOBAL_HEADER.pack(0xA1B2C3D4, 2, 4, 0, 0, SNAPLEN, LINKTYPE_RAW)

# An IP packet as (headers, payload): the payload is a view into the frame, never copied until written.
Packet = tuple[bytes, bytes | memoryview]


def _words(data: bytes | memoryview) -> int:
    """A number congruent, modulo 0xFFFF, to the sum of `data`'s big-endian 16-bit words (an odd last
    byte padded with a zero), which is all a ones' complement sum needs: 2**16 is 1 modulo 0xFFFF, so
    the whole buffer read as one integer will do, and int.from_bytes reads it in C."""
    value = int.from_bytes(data, "big")
    return value << 8 if len(data) & 1 else value


def _checksum(total: int) -> int:
    """The Internet checksum (RFC 1071) of words whose sum is congruent to `total`. A non-zero sum folds
    to 0xFFFF, never to 0; every sum here is non-zero, as it counts the protocol number 6."""
    return ~(total % 0xFFFF or 0xFFFF) & 0xFFFF


def _address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone ("fe80::1%eth0")
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


@dataclass(slots=True)
class _Side:
    address: bytes
    port: int
    next_seq: int  # the sequence number of the next byte this side sends
    acked: int  # how far the other side has acknowledged this side's bytes
    address_words: int = 0  # _words(address), for the checksums
    ip_id: int = 0


class TcpConversation:
    """One connection's synthetic TCP packets: exact sequence numbers, segmenting, acknowledgements."""

    def __init__(self, client: tuple[str, int], broker: tuple[str, int], client_isn: int, broker_isn: int,
                 *, mss: int = MSS) -> None:
        client_ip, broker_ip = _address(client[0]), _address(broker[0])
        self.ipv6 = isinstance(client_ip, ipaddress.IPv6Address) and isinstance(broker_ip, ipaddress.IPv6Address)
        if not self.ipv6:
            # Mixed or unparseable ends (not seen on a TCP socket): IPv4, with 0.0.0.0 for what is not IPv4.
            client_ip = client_ip if isinstance(client_ip, ipaddress.IPv4Address) else ipaddress.IPv4Address(0)
            broker_ip = broker_ip if isinstance(broker_ip, ipaddress.IPv4Address) else ipaddress.IPv4Address(0)
        assert client_ip is not None and broker_ip is not None
        self.client = _Side(client_ip.packed, client[1] & 0xFFFF, client_isn & _SEQ_MASK, client_isn & _SEQ_MASK,
                            _words(client_ip.packed))
        self.broker = _Side(broker_ip.packed, broker[1] & 0xFFFF, broker_isn & _SEQ_MASK, broker_isn & _SEQ_MASK,
                            _words(broker_ip.packed))
        self.mss = mss

    def open(self) -> list[Packet]:
        return [self._segment(self.client, self.broker, SYN, b"", _SYN_OPTIONS),
                self._segment(self.broker, self.client, SYN | ACK, b"", _SYN_OPTIONS),
                self._segment(self.client, self.broker, ACK, b"")]

    def send(self, from_client: bool, data: bytes) -> list[Packet]:
        """The segments carrying `data` from one side, each acknowledging all the other side sent, with
        a bare ACK from the receiver first whenever the sender would otherwise pass half the window."""
        sender, receiver = (self.client, self.broker) if from_client else (self.broker, self.client)
        view = memoryview(data)
        packets: list[Packet] = []
        for start in range(0, len(view), self.mss):
            chunk = view[start:start + self.mss]
            if (sender.next_seq + len(chunk) - sender.acked) & _SEQ_MASK > WINDOW // 2:
                packets.append(self._segment(receiver, sender, ACK, b""))
            last = start + self.mss >= len(view)
            packets.append(self._segment(sender, receiver, PSH | ACK if last else ACK, chunk))
        return packets

    def close(self) -> list[Packet]:
        # The tap does not say which side closed first; the broker's FIN is as good a guess as any.
        return [self._segment(self.broker, self.client, FIN | ACK, b""),
                self._segment(self.client, self.broker, FIN | ACK, b""),
                self._segment(self.broker, self.client, ACK, b"")]

    def _segment(self, sender: _Side, receiver: _Side, flags: int, payload: bytes | memoryview,
                 options: bytes = b"") -> Packet:
        seq = sender.next_seq
        ack = receiver.next_seq if flags & ACK else 0
        if flags & ACK:
            receiver.acked = ack
        payload_length = len(payload)
        sender.next_seq = (seq + payload_length + (1 if flags & (SYN | FIN) else 0)) & _SEQ_MASK
        header_bytes = _TCP_HEADER_BYTES + len(options)
        tcp_length = header_bytes + payload_length
        offset_and_flags = header_bytes << 10 | flags  # the header length in 32-bit words, in the top 4 bits
        # The checksums are summed from the fields rather than over packed bytes: the payload is the
        # only part that is not a handful of integers. The pseudo-header (RFC 793 / RFC 8200) is the
        # same sum for IPv4 and IPv6: both addresses, the protocol and the TCP length.
        tcp_sum = (sender.address_words + receiver.address_words + 6 + tcp_length
                   + sender.port + receiver.port + (seq >> 16) + (seq & 0xFFFF) + (ack >> 16) + (ack & 0xFFFF)
                   + offset_and_flags + 0xFFFF)
        if options:
            tcp_sum += _words(options)
        if payload_length:
            tcp_sum += _words(payload)
        # 0xFFFF: 64 KiB in the SYNs, whose window is never scaled (RFC 7323), WINDOW after them.
        tcp = _TCP.pack(sender.port, receiver.port, seq, ack, header_bytes << 2, flags, 0xFFFF, _checksum(tcp_sum), 0)
        if self.ipv6:
            ip = _IPV6.pack(6 << 28, tcp_length, 6, 64, sender.address, receiver.address)
        else:
            sender.ip_id = ip_id = (sender.ip_id + 1) & 0xFFFF
            total_length = 20 + tcp_length
            ip_sum = _IPV4_FIXED_WORDS + total_length + ip_id + sender.address_words + receiver.address_words
            ip = _IPV4.pack(0x45, 0, total_length, ip_id, 0x4000, 64, 6, _checksum(ip_sum), sender.address,
                            receiver.address)
        return ip + tcp + options, payload


def _isn(connection_id: int, salt: int) -> int:
    """A fixed initial sequence number per connection and side, so captures of one run are reproducible
    and the two directions' numbers are far apart (easy to tell apart in Wireshark's absolute view)."""
    return ((connection_id + 1) * 0x9E3779B1 + salt) & _SEQ_MASK


class PcapWriter:
    """The wire tap (broker/wire/hooks.py) that writes `--pcap FILE`."""

    def __init__(self, path: str, clock: Clock, *, buffer_bytes: int = 256 * 1024,
                 flush_interval_s: float = 1.0) -> None:
        # Opening fails the broker's start, like an unwritable --trace file: the capture was asked for.
        self._file: io.FileIO | None = open(path, "wb", buffering=0)  # noqa: SIM115  # closed by close()
        self.path = path
        self._buffer = bytearray()
        self._buffer_bytes = buffer_bytes
        self._flush_interval_s = flush_interval_s
        self._flush_timer: asyncio.TimerHandle | None = None
        self._conversations: dict[int, TcpConversation] = {}
        self._now_us = _microseconds(clock)
        self.packets = 0
        self._buffer += PCAP_HEADER
        self._flush()  # a valid empty capture at once, whatever happens to the broker later

    def connection_opened(self, connection_id: int, client: tuple[str, int], broker: tuple[str, int]) -> None:
        if self._file is None:
            return
        conversation = TcpConversation(client, broker, _isn(connection_id, 0), _isn(connection_id, 0x8000_0000))
        self._conversations[connection_id] = conversation
        self._record(conversation.open())

    def frame(self, connection_id: int, from_client: bool, data: bytes) -> None:
        conversation = self._conversations.get(connection_id)
        # None: the capture is off, or the connection opened before the tap was added (not done today).
        if conversation is not None and self._file is not None:
            self._record(conversation.send(from_client, data))

    def connection_closed(self, connection_id: int) -> None:
        conversation = self._conversations.pop(connection_id, None)
        if conversation is not None and self._file is not None:
            self._record(conversation.close())

    def close(self) -> None:
        """Close what is still open (the broker is stopping), flush and close the file."""
        for connection_id in list(self._conversations):
            self.connection_closed(connection_id)
        if self._flush_timer is not None:
            self._flush_timer.cancel()
            self._flush_timer = None
        self._flush()
        if self._file is not None:
            try:
                self._file.close()
            except OSError as exc:
                self._fail(exc)
            self._file = None

    def _record(self, packets: list[Packet]) -> None:
        now_us = self._now_us()
        seconds, micros = divmod(now_us, 1_000_000)
        for headers, payload in packets:
            length = len(headers) + len(payload)
            buffer = self._buffer
            buffer += _RECORD_HEADER.pack(seconds, micros, length, length)
            buffer += headers
            buffer += payload
            if len(buffer) >= self._buffer_bytes:
                self._flush()
                if self._file is None:
                    return
        self.packets += len(packets)
        if self._buffer and self._flush_timer is None:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        # Real time on the event loop, not the broker's clock: a manual clock that nobody advances must
        # not keep the capture off the disk.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # driven outside an event loop (unit tests): flushed by size and on close
        self._flush_timer = loop.call_later(self._flush_interval_s, self._timed_flush)

    def _timed_flush(self) -> None:
        self._flush_timer = None
        self._flush()

    def _flush(self) -> None:
        data, self._buffer = self._buffer, bytearray()
        if self._file is None or not data:
            return
        try:
            pending = memoryview(data)
            while pending:  # a raw file may take less than asked (a signal, a nearly full disk)
                written = self._file.write(pending)
                if not written:
                    raise OSError("pcap file took no bytes")
                pending = pending[written:]
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        _log.error("pcap capture failed; capture stopped, the broker goes on", path=self.path, error=str(exc))
        file, self._file = self._file, None
        self._conversations.clear()
        if file is not None:
            with contextlib.suppress(OSError):  # the first failure is reported; a second says nothing new
                file.close()


def _microseconds(clock: Clock) -> Callable[[], int]:
    """Packet times come from the broker's clock, so a capture lines up with the trace's `time_ms` and,
    under `--clock manual`, shows the time the broker lived in. The system clock is read at its own
    microsecond grain (the same source as its now_ms) so that request-to-response times below a
    millisecond are not all zero in Wireshark."""
    if isinstance(clock, SystemClock):
        return lambda: time.time_ns() // 1000
    return lambda: clock.now_ms() * 1000
