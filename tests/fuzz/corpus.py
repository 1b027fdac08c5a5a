"""The fuzz corpus: request frames recorded from real clients, one JSON line each.

A line is `{"client": ..., "api": key, "version": v, "frame": hex}`, the frame without its 4-byte size
prefix. Hex in JSON lines keeps the committed file diffable and greppable by client or api; the cap
per (client, api, version) keeps it small while every client's encoding of every version it sent stays.
"""

from __future__ import annotations

import json
import struct
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

CORPUS_PATH = Path(__file__).with_name("corpus.jsonl")
# Frames kept per (client, api, version): the first, plus a few differently shaped ones.
MAX_PER_KEY = 4
# Bigger frames (produce batches of many records) add bytes to mutate, not new structure.
MAX_FRAME_BYTES = 4096
_HEADER = struct.Struct(">hhi")
# The client name of frames encoded by minikafka's own codec, for served APIs no real client sends.
WIRE_CLIENT = "minikafka-wire"


@dataclass(frozen=True, slots=True)
class CorpusFrame:
    client: str
    api_key: int
    api_version: int
    frame: bytes  # header and body, without the size prefix

    @classmethod
    def parse(cls, client: str, frame: bytes) -> CorpusFrame:
        api_key, api_version, _correlation_id = _HEADER.unpack_from(frame, 0)
        return cls(client, api_key, api_version, frame)

    def shape(self) -> bytes:
        """The frame with its correlation id zeroed: two frames of one shape differ only in that id."""
        return self.frame[:4] + b"\x00\x00\x00\x00" + self.frame[8:]


def select(frames: Iterable[CorpusFrame]) -> list[CorpusFrame]:
    """Dedupe by shape, cap per (client, api, version), prefer small frames; stable order for diffs."""
    by_key: dict[tuple[str, int, int], dict[bytes, CorpusFrame]] = defaultdict(dict)
    for frame in frames:
        by_key[(frame.client, frame.api_key, frame.api_version)].setdefault(frame.shape(), frame)
    selected: list[CorpusFrame] = []
    for key in sorted(by_key):
        candidates = sorted(by_key[key].values(), key=lambda f: (len(f.frame), f.frame))
        small = [f for f in candidates if len(f.frame) <= MAX_FRAME_BYTES] or candidates[:1]
        selected += [CorpusFrame(f.client, f.api_key, f.api_version, f.shape()) for f in small[:MAX_PER_KEY]]
    return selected


def save(frames: Iterable[CorpusFrame], path: Path = CORPUS_PATH) -> list[CorpusFrame]:
    selected = select(frames)
    with open(path, "w") as out:
        for frame in selected:
            out.write(json.dumps({"client": frame.client, "api": frame.api_key, "version": frame.api_version,
                                  "frame": frame.frame.hex()}) + "\n")
    return selected


def load(path: Path = CORPUS_PATH) -> list[CorpusFrame]:
    frames = []
    with open(path) as lines:
        for line in lines:
            entry = json.loads(line)
            frames.append(CorpusFrame(entry["client"], entry["api"], entry["version"], bytes.fromhex(entry["frame"])))
    return frames
