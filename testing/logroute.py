"""Send the structlog output of in-process broker threads to each broker's log file.

structlog's configuration is global to the process, and the broker's modules log through module-level
loggers, so a broker running inside a test process would otherwise print into the test's output (or into
the caller's own structlog set-up). Every in-process broker runs on a thread of its own; this module routes
by thread: lines logged on a registered broker thread go to that broker's file, every other thread's lines
go where they went before.

What is changed globally, once, and only as much as needed:
- structlog's `logger_factory` is wrapped (the caller's own factory still makes the loggers of every
  other thread);
- if nobody has configured structlog yet, its default processor chain is kept but its final renderer is
  wrapped too, so broker lines are written as JSON while other threads keep structlog's default console
  rendering. A caller's own processors are never replaced: with them, broker lines are rendered their way.
A caller that calls `structlog.configure(logger_factory=...)` after a broker started takes the routing
away; the broker's lines then follow the caller's configuration.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, MutableMapping
from typing import Any, TextIO

import structlog

# The methods structlog's BoundLogger calls on the logger a factory made (PrintLogger's and stdlib's).
_LOG_METHODS = frozenset({"msg", "debug", "info", "warning", "warn", "error", "err", "critical", "fatal",
                          "exception", "failure", "log"})

_sinks: dict[int, TextIO] = {}
_install_lock = threading.Lock()
_installed_factory: _RoutingLoggerFactory | None = None


def _current_sink() -> TextIO | None:
    return _sinks.get(threading.get_ident())


class _RoutingLogger:
    """Writes broker-thread lines to that thread's sink; anything else goes to the caller's logger."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        sink = _current_sink()
        if sink is None or name not in _LOG_METHODS:
            return getattr(self._inner, name)

        def write(*args: Any, **kwargs: Any) -> None:
            line = str(args[0]) if args else repr(kwargs)
            sink.write(line.rstrip("\n") + "\n")
            sink.flush()

        return write


class _RoutingLoggerFactory:
    def __init__(self, inner: Callable[..., Any]) -> None:
        self.inner = inner

    def __call__(self, *args: Any) -> _RoutingLogger:
        return _RoutingLogger(self.inner(*args))


class _RoutingRenderer:
    """The last processor: JSON for broker threads (a file for machines and people), the default otherwise."""

    def __init__(self, default: Callable[..., Any]) -> None:
        self.default = default
        self.json = structlog.processors.JSONRenderer()

    def __call__(self, logger: Any, method_name: str, event_dict: MutableMapping[str, Any]) -> Any:
        if _current_sink() is None:
            return self.default(logger, method_name, event_dict)
        return self.json(logger, method_name, event_dict)


def _install() -> None:
    global _installed_factory
    with _install_lock:
        config = structlog.get_config()
        if _installed_factory is not None and config["logger_factory"] is _installed_factory:
            return
        changes: dict[str, Any] = {}
        if not structlog.is_configured():
            processors = list(config["processors"])
            if processors:
                processors[-1] = _RoutingRenderer(processors[-1])
                changes["processors"] = processors
        _installed_factory = _RoutingLoggerFactory(config["logger_factory"])
        structlog.configure(logger_factory=_installed_factory, **changes)


def route_current_thread(sink: TextIO) -> None:
    """From now on, structlog lines logged on the calling thread go to `sink`."""
    _install()
    _sinks[threading.get_ident()] = sink


def unroute_current_thread() -> None:
    _sinks.pop(threading.get_ident(), None)
