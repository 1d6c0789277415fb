"""Sound devices as PortAudio sees them: listing and resolving a user's device choice.

PortAudio (through ``sounddevice``) is loaded on first use, so importing :mod:`audio` never
needs it. Every failure is an :class:`~voxline.base.errors.AudioError` whose message is one line
naming what is available, e.g. ``no output device 7; available: 0 pulse, 1 default``.

PortAudio enumerates devices once, when it is initialised; :func:`refresh_devices`
re-enumerates (only while no stream is open), e.g. after a sound server was started.
"""

from __future__ import annotations

from collections.abc import Callable

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal, assert_never

from voxline.base.errors import AudioError

__all__ = [
    "DeviceInfo",
    "Kind",
    "Latency",
    "NO_DEVICES",
    "describe",
    "describe_all",
    "list_devices",
    "load_sounddevice",
    "open_error",
    "open_stream",
    "pick_rate",
    "refresh_devices",
    "resolve_device",
]

Kind = Literal["input", "output"]
Latency = str | float  # "low", "high" or seconds

_NO_PORTAUDIO = "the PortAudio library is not installed; install libportaudio2 (e.g. apt-get install libportaudio2)"
NO_DEVICES = "no sound devices found; is a sound server (PulseAudio or PipeWire) running?"


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

    def channels(self, kind: Kind) -> int:
        return self.max_input_channels if kind == "input" else self.max_output_channels

    @property
    def label(self) -> str:
        """``"<index> <name>"``, as in error messages and the device table."""
        return f"{self.index} {self.name}"


def load_sounddevice() -> ModuleType:
    """The ``sounddevice`` module; AudioError when PortAudio is missing."""
    try:
        import sounddevice
    except OSError:
        raise AudioError(_NO_PORTAUDIO) from None
    return sounddevice


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
    """Every device PortAudio knows, in index order (empty without any sound server or card)."""
    sd = load_sounddevice()
    default_in, default_out = _default_index(sd, "input"), _default_index(sd, "output")
    hostapis: Any = sd.query_hostapis()
    devices: list[DeviceInfo] = []
    for raw in sd.query_devices():
        index = int(raw["index"])
        devices.append(
            DeviceInfo(
                index=index,
                name=str(raw["name"]),
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
    case-insensitive), a string of digits, or None for the system default."""
    devices = list_devices()
    if not any(d.channels(kind) > 0 for d in devices):
        raise AudioError(NO_DEVICES if not devices else f"no {kind} devices found; devices: {describe_all(devices)}")
    if isinstance(spec, str) and spec.strip().isdigit():
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
    usable = [d for d in devices if d.channels(kind) > 0]
    wanted = name.strip().casefold()
    exact = [d for d in usable if d.name.casefold() == wanted]
    if exact:
        return exact[0]
    partial = [d for d in usable if wanted in d.name.casefold()]
    if len(partial) == 1:
        return partial[0]
    if partial:
        names = ", ".join(d.label for d in partial)
        raise AudioError(f"{kind} device name {name!r} is ambiguous: {names}")
    raise AudioError(f"no {kind} device named {name!r}; available: {describe(devices, kind)}")


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
) -> Any:
    """An int16 mono PortAudio stream of ``block`` samples at ``rate`` (scaled to the device rate).

    Not started. A device that refuses the settings is one line naming the devices there are.
    """
    sd = load_sounddevice()
    stream_class = sd.InputStream if kind == "input" else sd.OutputStream
    try:
        return stream_class(
            samplerate=device_rate,
            blocksize=block * device_rate // rate,
            device=info.index,
            channels=1,
            dtype="int16",
            latency=latency,
            callback=callback,
        )
    except (sd.PortAudioError, ValueError) as exc:
        raise open_error(info, kind, exc) from None


def pick_rate(info: DeviceInfo, kind: Kind, rate: int, forced: int | None) -> int:
    """``forced`` if given, else ``rate`` when the device accepts it, else its default rate."""
    if forced is not None:
        return forced
    sd = load_sounddevice()
    check = sd.check_output_settings if kind == "output" else sd.check_input_settings
    try:
        check(device=info.index, channels=1, dtype="int16", samplerate=rate)
    except sd.PortAudioError:
        return int(info.default_samplerate)
    return rate
