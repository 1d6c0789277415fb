"""Sound devices as PortAudio sees them: listing and resolving a user's device choice.

PortAudio (through ``sounddevice``) is loaded on first use, so importing :mod:`audio` never
needs it. Every failure is an :class:`~voxline.base.errors.AudioError` whose message is one line
naming what is available, e.g. ``no output device 7; available: 0 pulse, 1 default``.

PortAudio enumerates devices once, when it is initialised; :func:`refresh_devices`
re-enumerates (only while no stream is open), e.g. after a sound server was started.

**The sound server's devices.** On a desktop PortAudio sees PulseAudio or PipeWire as one
ALSA device (``pulse``); the sinks and sources the desktop shows are listed after PortAudio's
own devices, numbered on from them, with ``route`` naming them on the server
(:mod:`voxline.audio.sound_server`). A stream on one opens PortAudio's ``pulse`` device routed
to it. Their numbers follow the server's current list; their names stay.
"""

from __future__ import annotations

import contextlib
import logging
import operator
from collections.abc import Callable

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, assert_never

from voxline.audio import sound_server
from voxline.audio.alsa_messages import route_alsa_messages
from voxline.base.arguments import as_error, real, whole
from voxline.base.errors import AudioError
from voxline.base.shown import printable

__all__ = [
    "DeviceInfo",
    "Kind",
    "Latency",
    "NO_DEVICES",
    "close_ended",
    "describe",
    "describe_all",
    "list_devices",
    "load_sounddevice",
    "open_error",
    "open_stream",
    "pick_rate",
    "portaudio_index",
    "refresh_devices",
    "resolve_device",
    "started_again",
    "stream_options",
]

_log = logging.getLogger(__name__)

Kind = Literal["input", "output"]
Latency = str | float  # "low", "high" or seconds

def stream_options(owner: str, block: Any, rate: Any, latency: Any, device_rate: Any) -> None:
    """A speaker's or microphone's stream options checked, each named in one :class:`AudioError` line if wrong
    (before, a negative latency opened a stream whose callback spun, and a float rate failed inside PortAudio)."""
    with as_error(AudioError, owner):
        whole(_as_whole(block), "block", low=1, high=1 << 16)
        whole(_as_whole(rate), "rate", low=8_000, high=192_000)
        if device_rate is not None:  # what the device runs at is the device's to refuse, in its own words
            whole(_as_whole(device_rate), "device_rate", low=1)
        if isinstance(latency, str):
            if latency not in ("low", "high"):
                raise ValueError(f"latency takes 'low', 'high' or seconds, not {latency!r}")
        else:
            real(latency, "latency", low=0.0, high=10.0, above=True)


def _as_whole(value: Any) -> Any:
    """A NumPy integer, or a float with nothing after the point (a device's ``default_samplerate``), as the int it
    is; anything else as it came, for :func:`whole` to judge."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if not isinstance(value, (bool, int)) and hasattr(value, "__index__"):
        return operator.index(value)
    return value


_NO_PORTAUDIO = "the PortAudio library is not installed; install libportaudio2 (e.g. apt-get install libportaudio2)"
NO_DEVICES = "no sound devices found; is a sound server (PulseAudio or PipeWire) running?"
_SERVER_PORTS = ("pulse", "default")  # PortAudio's (ALSA's) devices that reach the sound server, by preference


@dataclass(frozen=True, slots=True)
class DeviceInfo:
    """One PortAudio device: index, name and what it can do."""

    index: int
    name: str
    hostapi: str
    max_input_channels: int
    max_output_channels: int
    default_samplerate: float
    is_default_in: bool = False
    is_default_out: bool = False
    route: str | None = None  # the sound server's name for a sink or source; None: a PortAudio device

    def channels(self, kind: Kind) -> int:
        return self.max_input_channels if kind == "input" else self.max_output_channels

    @property
    def label(self) -> str:
        """``"<index> <name>"`` (with the server's name for its devices), as in messages and the table."""
        if self.route is not None and self.route != self.name:
            return f"{self.index} {self.name} ({printable(self.route)})"
        return f"{self.index} {self.name}"


def load_sounddevice() -> ModuleType:
    """The ``sounddevice`` module; AudioError when PortAudio is missing. ALSA's own messages go
    to the log from then on (:mod:`voxline.audio.alsa_messages`)."""
    try:
        import sounddevice
    except OSError:
        raise AudioError(_NO_PORTAUDIO) from None
    route_alsa_messages()
    module: ModuleType = sounddevice  # untyped
    return module


def refresh_devices() -> None:
    """Re-enumerate devices (PortAudio re-initialisation); no stream may be open."""
    sd = load_sounddevice()
    sd._terminate()  # sounddevice's maintainers give this pair as the way to re-enumerate
    sd._initialize()


def _default_index(sd: ModuleType, kind: Kind) -> int | None:
    try:
        return int(sd.query_devices(kind=kind)["index"])
    except (sd.PortAudioError, ValueError, KeyError):
        return None


def list_devices() -> list[DeviceInfo]:
    """Every device PortAudio knows, in index order, then the sound server's sinks and sources
    (empty without any sound server or card)."""
    devices = _portaudio_devices()
    server = sound_server.connect()
    if server is None:
        return devices
    with server:
        found = server.devices()
        hostapi = server.label
    if not any(d.name in _SERVER_PORTS for d in devices):
        return devices  # PortAudio cannot reach the server: its devices could not be opened
    first = len(devices)
    for offset, d in enumerate(found):
        devices.append(
            DeviceInfo(
                index=first + offset,
                name=printable(d.description),  # shown on terminals: a device's description is anyone's to set
                hostapi=hostapi,
                max_input_channels=d.channels if d.kind == "input" else 0,
                max_output_channels=d.channels if d.kind == "output" else 0,
                default_samplerate=float(d.rate),
                is_default_in=d.is_default and d.kind == "input",
                is_default_out=d.is_default and d.kind == "output",
                route=d.name,
            )
        )
    return devices


def _portaudio_devices() -> list[DeviceInfo]:
    sd = load_sounddevice()
    default_in, default_out = _default_index(sd, "input"), _default_index(sd, "output")
    hostapis: Any = sd.query_hostapis()
    devices: list[DeviceInfo] = []
    for raw in sd.query_devices():
        index = int(raw["index"])
        devices.append(
            DeviceInfo(
                index=index,
                name=printable(str(raw["name"])),
                hostapi=str(hostapis[raw["hostapi"]]["name"]),
                max_input_channels=int(raw["max_input_channels"]),
                max_output_channels=int(raw["max_output_channels"]),
                default_samplerate=float(raw["default_samplerate"]),
                is_default_in=index == default_in,
                is_default_out=index == default_out,
            )
        )
    return devices


def describe(devices: list[DeviceInfo], kind: Kind) -> str:
    """``"0 pulse, 1 default"``: the devices usable as ``kind``, for one-line messages."""
    usable = [d.label for d in devices if d.channels(kind) > 0]
    return ", ".join(usable) if usable else "none"


def resolve_device(spec: int | str | None, kind: Kind) -> DeviceInfo:
    """The device for a user's choice: an index, a name (exact, else a unique substring,
    case-insensitive), a label as messages show it (``"2 Null Output (vspk)"``), a string of digits,
    or None for the system default."""
    if spec is not None and (isinstance(spec, bool) or not isinstance(spec, (int, str))):  # 1.5 from a slider, True
        raise TypeError(f"an {kind} device is an index, a name or None, not {type(spec).__name__} {spec!r}")
    devices = list_devices()
    if not any(d.channels(kind) > 0 for d in devices):
        raise AudioError(NO_DEVICES if not devices else f"no {kind} devices found; devices: {describe_all(devices)}")
    if isinstance(spec, str) and spec.strip().isascii() and spec.strip().isdigit():  # not "²", which int() refuses
        spec = int(spec.strip())
    match spec:
        case None:
            found = next((d for d in devices if (d.is_default_in if kind == "input" else d.is_default_out)), None)
            if found is None:
                raise AudioError(f"no default {kind} device; available: {describe(devices, kind)}")
        case int():
            found = next((d for d in devices if d.index == spec), None)
            if found is None:
                raise AudioError(f"no {kind} device {spec}; available: {describe(devices, kind)}")
        case str() if not spec.strip():
            raise AudioError(f"an {kind} device name is empty: give an index or a name; available: "
                             f"{describe(devices, kind)}")
        case str():
            found = _by_name(devices, spec, kind)
        case _:
            assert_never(spec)
    if found.channels(kind) <= 0:
        raise AudioError(f"device {found.label} has no {kind} channels; available: {describe(devices, kind)}")
    return found


def describe_all(devices: list[DeviceInfo]) -> str:
    return ", ".join(d.label for d in devices)


def _by_name(devices: list[DeviceInfo], name: str, kind: Kind) -> DeviceInfo:
    """A label as messages show it first (index and name, unique by its index), then the server's own name (unique
    by construction), then the shown name, then a part of either.

    A part of a name that matches only monitors (what a speaker plays, offered as an input) is refused for an
    input: ``--input-device vspk`` meant the speaker's neighbour microphone, and recording the speaker would feed
    the assistant its own voice. Such a monitor is taken by its whole name."""
    usable = [d for d in devices if d.channels(kind) > 0]
    wanted = name.strip().casefold()
    parts = [d for d in usable if wanted in d.name.casefold() or (d.route is not None and wanted in d.route.casefold())]
    for matches in (
        [d for d in usable if d.label.casefold() == wanted],  # as messages and the table show it: "2 Null Output"
        [d for d in usable if d.route is not None and d.route.casefold() == wanted],
        [d for d in usable if d.name.casefold() == wanted],
        parts,
    ):
        if matches is parts and matches and kind == "input" and "monitor" not in wanted and all(map(_monitor, matches)):
            names = ", ".join(d.label for d in matches)
            raise AudioError(f"input device name {name!r} matches only what a speaker plays ({names}), not a "
                             f"microphone: give that name whole to record it; available: {describe(devices, kind)}")
        if len(matches) == 1:
            return matches[0]
        if matches:
            names = ", ".join(d.label for d in matches)
            raise AudioError(f"{kind} device name {name!r} is ambiguous: {names}")
    raise AudioError(f"no {kind} device named {name!r}; available: {describe(devices, kind)}")


def _monitor(device: DeviceInfo) -> bool:
    """A sound server's monitor source: what a speaker plays, offered as an input."""
    return device.route is not None and device.route.endswith(".monitor")


def open_error(info: DeviceInfo, kind: Kind, exc: Exception) -> AudioError:
    """One line for a device that exists but cannot be opened (busy, bad settings)."""
    reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    available = describe(list_devices(), kind)
    return AudioError(f"cannot open {kind} device {info.label}: {reason}; available: {available}")


def open_stream(
    info: DeviceInfo,
    kind: Kind,
    *,
    device_rate: int,
    block: int,
    rate: int,
    latency: Latency,
    callback: Callable[..., None],
    tag: str = "",
    fallback: bool = False,
) -> Any:
    """An int16 mono PortAudio stream of ``block`` samples at ``rate`` (scaled to the device rate).

    Not started. A sound server's device is reached through PortAudio's ``pulse`` device, the
    stream tagged ``tag`` there (:func:`voxline.audio.sound_server.routed_env`); with ``fallback``, on the
    server's default device instead, tagged all the same. A device that refuses the settings is one line
    naming the devices there are.
    """
    sd = load_sounddevice()
    stream_class = sd.InputStream if kind == "input" else sd.OutputStream
    routed: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
    if info.route is not None:
        routed = sound_server.routed_env(kind, None if fallback else info.route, tag)
    try:
        with routed:
            return stream_class(
                samplerate=device_rate,
                blocksize=block * device_rate // rate,
                device=portaudio_index(info),
                channels=1,
                dtype="int16",
                latency=latency,
                callback=callback,
            )
    except (sd.PortAudioError, ValueError) as exc:
        raise open_error(info, kind, exc) from None


def started_again(open_at: Callable[[bool], Any], info: DeviceInfo, prepare: Callable[[], None],
                  what: str) -> tuple[Any, bool] | None:
    """A fresh stream started in place of one that ended, and whether it is on the sound server's fallback: opened
    with ``open_at(False)`` on its device, or where that fails and the device is the server's (unplugged, say),
    ``open_at(True)`` on the server's default device. ``prepare`` runs after each open, before the start (no
    callback of the new stream can have run). None if neither opened and started; nothing is left open then."""
    sd = load_sounddevice()
    for fallback in (False, True) if info.route is not None else (False,):
        stream = None
        try:
            stream = open_at(fallback)
            prepare()
            stream.start()
        except (sd.PortAudioError, AudioError) as exc:
            _log.info("the %s stream could not be opened again%s yet: %s", what,
                      " on the server's default device" if fallback else "", exc)
            if stream is not None:
                with contextlib.suppress(sd.PortAudioError):
                    stream.close()
            continue
        return stream, fallback
    return None


def close_ended(stream: Any) -> None:
    """Close a stream that ended (None: nothing to do); it may fail as its device did, and is let go all the same."""
    if stream is not None:
        sd = load_sounddevice()
        with contextlib.suppress(sd.PortAudioError):
            stream.abort()
        with contextlib.suppress(sd.PortAudioError):
            stream.close()


def portaudio_index(info: DeviceInfo) -> int:
    """The PortAudio device that plays or records ``info``: itself, or the one reaching its server."""
    if info.route is None:
        return info.index
    ports = {d.name: d.index for d in _portaudio_devices()}
    for name in _SERVER_PORTS:
        if name in ports:
            return ports[name]
    raise AudioError(f"cannot reach sound server device {info.label}: PortAudio has no pulse or default device")


def pick_rate(info: DeviceInfo, kind: Kind, rate: int, forced: int | None) -> int:
    """``forced`` if given, else ``rate`` when the device accepts it, else its default rate."""
    if forced is not None:
        return forced
    sd = load_sounddevice()
    check = sd.check_output_settings if kind == "output" else sd.check_input_settings
    try:
        check(device=portaudio_index(info), channels=1, dtype="int16", samplerate=rate)
    except sd.PortAudioError:
        return int(info.default_samplerate)
    return rate
