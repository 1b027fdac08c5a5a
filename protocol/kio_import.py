"""kio imported without Hypothesis, its strategies registered when Hypothesis itself is imported.

kio registers a Hypothesis strategy for each of its primitive types as it defines them whenever Hypothesis
is importable, importing Hypothesis to do so: 130-450 ms of a broker's start (measured with `python -X
importtime`), for strategies only a test drawing kio entities (`st.from_type`) uses. So the package's
`__init__` imports kio's phantom-type base with Hypothesis hidden, unless Hypothesis is already imported
(kio then registers as usual) or blocked (`minikafka serve` blocks it). Hypothesis runs the functions of
its "hypothesis" entry point group when it is imported (pyproject.toml names `register_kio_strategies`
there), which then registers what kio skipped: a test process gets the same strategies as before.
"""

from __future__ import annotations

import sys

_HYPOTHESIS = "hypothesis"
_deferred = False


def import_kio() -> None:
    """Import kio's phantom-type base, which decides once whether kio registers Hypothesis strategies."""
    global _deferred
    if "kio.static._phantom" in sys.modules or _HYPOTHESIS in sys.modules:
        return
    sys.modules[_HYPOTHESIS] = None  # type: ignore[assignment]  # an import of it now fails: kio skips it
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        if sys.modules.get(_HYPOTHESIS, ...) is None:
            del sys.modules[_HYPOTHESIS]
    _deferred = True


def register_kio_strategies() -> None:
    """Hypothesis's entry point: what kio would have registered had Hypothesis been imported first."""
    if not _deferred:
        return
    import hypothesis
    from kio.static import _phantom

    _phantom.hypothesis = hypothesis  # kio types defined from now on register themselves
    for cls in _all_subclasses(_phantom.Phantom):
        cls.__hypothesis_hook__()  # type: ignore[attr-defined]  # every Phantom subclass has it


def _all_subclasses(cls: type) -> list[type]:
    found: list[type] = []
    subclass: type
    for subclass in cls.__subclasses__():
        found += [subclass, *_all_subclasses(subclass)]
    return list(dict.fromkeys(found))


__all__ = ["import_kio", "register_kio_strategies"]
