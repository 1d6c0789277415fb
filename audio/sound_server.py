"""The desktop sound server (PulseAudio, or PipeWire through its PulseAudio interface).

PortAudio on Linux sees the sound server as one ALSA device, ``pulse`` (and ``default``); the
sinks and sources a user sees in their desktop's sound settings are the server's. This module
lists them and finds and moves the streams voxline opened on them, through ``pulsectl``
(bindings to the server's own client library, ``libpulse``).

Everything here blocks for a round trip to the server (well under a millisecond on a local
socket): call it from a thread, not the event loop. Without ``pulsectl``, ``libpulse`` or a
running server, :func:`connect` returns None and voxline lists PortAudio's devices only.

A stream is opened on a chosen server device by opening PortAudio's ``pulse`` device with
``PULSE_SINK`` / ``PULSE_SOURCE`` naming it (libpulse reads them when the ALSA plugin opens
the stream), and tagged through ``PULSE_PROP`` with a property of its own
(:data:`TAG_PROPERTY`), so that it can be found again to be moved back when its device returns.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ServerDevice", "SoundServer", "TAG_PROPERTY", "connect", "routed_env"]

Kind = Literal["input", "output"]
TAG_PROPERTY = "voxline.stream"
_ENV_LOCK = threading.Lock()  # the process environment is shared: one routed open at a time


@dataclass(frozen=True, slots=True)
class ServerDevice:
    """A sink (``output``) or source (``input``) of the sound server."""

    kind: Kind
    name: str  # the server's name for it, e.g. ``alsa_output.pci-0000_00_1f.3.analog-stereo``
    description: str  # what the desktop shows, e.g. ``Built-in Audio Analog Stereo``
    rate: int
    channels: int
    is_default: bool
    is_monitor: bool  # a source that records what a sink plays
    index: int = -1  # the server's number for it: a device unplugged and plugged in again comes back with a new one


class SoundServer:
    """One connection to the sound server; closed with :meth:`close` or ``with``."""

    def __init__(self, pulse: Any, server_name: str, lists: _Lists | None = None) -> None:
        self._pulse = pulse
        self.server_name = server_name  # "pulseaudio", or "PulseAudio (on PipeWire x.y.z)"
        self._lock = threading.Lock()  # libpulse's blocking calls are not re-entrant
        self._lists = lists  # sinks and sources with their rates read in time (see _rate_keeping_lists)

    @property
    def label(self) -> str:
        """``PipeWire`` or ``PulseAudio``, as the device table's host-API column says it."""
        return "PipeWire" if "pipewire" in self.server_name.casefold() else "PulseAudio"

    def close(self) -> None:
        with self._lock:
            self._pulse.close()

    def __enter__(self) -> SoundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def devices(self) -> list[ServerDevice]:
        """Every sink, then every source (monitors included), in the server's order."""
        with self._lock:
            info = self._pulse.server_info()
            if self._lists is not None:
                sinks, sources = self._lists[0](self._pulse), self._lists[1](self._pulse)
            else:
                sinks, sources = self._pulse.sink_list(), self._pulse.source_list()
        out = [_device("output", s, s.name == info.default_sink_name) for s in sinks]
        out += [_device("input", s, s.name == info.default_source_name) for s in sources]
        return out

    def default_name(self, kind: Kind) -> str | None:
        with self._lock:
            info = self._pulse.server_info()
        return str(info.default_sink_name if kind == "output" else info.default_source_name) or None

    def present(self, kind: Kind, name: str) -> bool:
        return any(d.kind == kind and d.name == name for d in self.devices())

    def stream_device(self, kind: Kind, tag: str) -> str | None:
        """The name of the device the stream tagged ``tag`` is on now (None: no such stream)."""
        with self._lock:
            streams = self._pulse.sink_input_list() if kind == "output" else self._pulse.source_output_list()
            devices = self._pulse.sink_list() if kind == "output" else self._pulse.source_list()
        names = {d.index: d.name for d in devices}
        for stream in streams:
            if stream.proplist.get(TAG_PROPERTY) == tag:
                return names.get(stream.sink if kind == "output" else stream.source)
        return None

    def move_stream(self, kind: Kind, tag: str, name: str) -> bool:
        """Move the stream tagged ``tag`` onto the device ``name``; False when either is gone."""
        with self._lock:
            if kind == "output":
                streams, devices = self._pulse.sink_input_list(), self._pulse.sink_list()
            else:
                streams, devices = self._pulse.source_output_list(), self._pulse.source_list()
            target = next((d.index for d in devices if d.name == name), None)
            stream = next((s.index for s in streams if s.proplist.get(TAG_PROPERTY) == tag), None)
            if target is None or stream is None:
                return False
            move = self._pulse.sink_input_move if kind == "output" else self._pulse.source_output_move
            move(stream, target)
        return True


def _device(kind: Kind, raw: Any, is_default: bool) -> ServerDevice:
    monitor = kind == "input" and getattr(raw, "monitor_of_sink", 0xFFFFFFFF) not in (None, 0xFFFFFFFF)
    return ServerDevice(
        kind=kind,
        name=str(raw.name),
        description=str(raw.description or raw.name),
        rate=int(raw.rate if hasattr(raw, "rate") else raw.sample_spec.rate),
        channels=int(raw.channel_count),
        is_default=is_default,
        is_monitor=monitor,
        index=int(raw.index),
    )


_Lists = tuple[Callable[[Any], list[Any]], Callable[[Any], list[Any]]]


def _rate_keeping_lists(pulsectl: Any) -> _Lists | None:
    """pulsectl's sink and source listings, each device's sample rate read while libpulse's
    record of it is still valid (None if this pulsectl is not built as expected).

    pulsectl keeps a device's sample spec as a view into libpulse's record, which libpulse frees
    once the listing's callback returns: read afterwards, the rate is whatever that memory holds
    by then (a sink running at 24 kHz listed at 48 kHz, another at 32691 Hz)."""
    try:
        import pulsectl._pulsectl as c  # type: ignore[import-untyped]

        make = pulsectl.Pulse._pulse_get_list
        lists = []
        for info_cls, cb_type, call in (
                (pulsectl.PulseSinkInfo, c.PA_SINK_INFO_CB_T, c.pa.context_get_sink_info_list),
                (pulsectl.PulseSourceInfo, c.PA_SOURCE_INFO_CB_T, c.pa.context_get_source_info_list)):
            lists.append(make(cb_type, call, _keeps_rate(info_cls)))
        return lists[0], lists[1]
    except (AttributeError, ImportError, TypeError):
        return None


def _keeps_rate(info_cls: Any) -> type:
    """``info_cls`` (one of pulsectl's untyped record classes) that also keeps the sample rate as ``rate``."""
    def __init__(self: Any, struct: Any = None, *args: Any, **kwargs: Any) -> None:
        info_cls.__init__(self, struct, *args, **kwargs)
        spec = getattr(struct, "sample_spec", None)  # made inside the callback: the record is valid
        self.rate = int(spec.rate) if spec is not None else 0

    return type("Info", (info_cls,), {"__init__": __init__})


def connect(client_name: str = "voxline") -> SoundServer | None:
    """A connection to the running sound server, or None where there is none to reach."""
    try:
        import pulsectl
    except (ImportError, OSError):  # not installed, or libpulse missing
        return None
    pulse = None
    try:
        pulse = pulsectl.Pulse(client_name, connect=False)
        _connect_within(pulse, pulsectl.PulseError)
        name = str(pulse.server_info().server_name)
    except Exception:  # no server running, refused, timed out: no server devices
        if pulse is not None:
            with contextlib.suppress(Exception):
                pulse.close()
        return None
    return SoundServer(pulse, name, _rate_keeping_lists(pulsectl))


_CONNECT_TRIES_S = (0.02, 0.1, 0.88)
"""pulsectl waits out the whole timeout it is given, connected or not (a second, before: twice per device a session
opens, on the caller's thread, an event loop's): short tries first, a second in all for a server slow to answer."""


def _connect_within(pulse: Any, refused: type[Exception]) -> None:
    for timeout in _CONNECT_TRIES_S:
        try:
            pulse.connect(autospawn=False, wait=False, timeout=timeout)
            return
        except refused:
            if timeout == _CONNECT_TRIES_S[-1]:
                raise


@contextlib.contextmanager
def routed_env(kind: Kind, name: str | None, tag: str) -> Iterator[None]:
    """While PortAudio opens its ``pulse`` device: route the stream to ``name`` (None: the server's default device)
    and tag it."""
    var = "PULSE_SINK" if kind == "output" else "PULSE_SOURCE"
    with _ENV_LOCK:
        saved = {k: os.environ.get(k) for k in (var, "PULSE_PROP")}
        if name is None:
            os.environ.pop(var, None)
        else:
            os.environ[var] = name
        mine = f"{TAG_PROPERTY}='{tag}'"
        os.environ["PULSE_PROP"] = f"{saved['PULSE_PROP']} {mine}" if saved["PULSE_PROP"] else mine
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
