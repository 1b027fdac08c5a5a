"""kio is imported without Hypothesis (protocol/kio_import.py), and its strategies are still there for a test
that imports Hypothesis afterwards: the same `st.from_type` draws as when Hypothesis came first."""

from __future__ import annotations

import subprocess
import sys

_KIO_FIRST = """
import sys
import minikafka.protocol.codec
assert "hypothesis" not in sys.modules, "importing the protocol imported Hypothesis"
from hypothesis import given, settings, strategies as st
from kio.schema.metadata.v12.request import MetadataRequest
from kio.static.primitive import i16

@settings(max_examples=20, database=None)
@given(st.from_type(MetadataRequest), st.from_type(i16))
def draw(request, number):
    assert isinstance(request, MetadataRequest) and -2**15 <= number < 2**15

draw()
print("drawn")
"""


def test_kio_types_have_strategies_when_hypothesis_comes_after_the_protocol() -> None:
    result = subprocess.run([sys.executable, "-c", _KIO_FIRST], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["drawn"]


def test_a_process_that_blocks_hypothesis_keeps_it_blocked() -> None:
    """`minikafka serve` blocks Hypothesis for good (sys.modules[...] = None); kio_import leaves that alone."""
    code = ("import sys; sys.modules['hypothesis'] = None; import minikafka.protocol.codec; "
            "print(sys.modules['hypothesis'] is None)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.split() == ["True"], result.stderr[-3000:]
