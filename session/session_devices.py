"""A session's own sound devices: a microphone and a speaker opened for it, and closed with it.

:func:`open_on_devices` is what :meth:`VoiceSession.on_devices <voxline.session.voice.VoiceSession.on_devices>`
does: it checks the keywords, picks the capture path's defaults, opens the devices the settings
name (or the ones given), and hands them to the session's constructor; whatever fails on the way
closes what it opened. :func:`close_devices` closes them at the session's close, on a daemon
thread and within ``DEVICE_CLOSE_S``: a stuck driver is left to itself, not waited for by the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol, TypedDict, TypeVar

from voxline.audio.aec import EchoCanceller
from voxline.audio.local_vad import LocalVad
from voxline.audio.playout import PlayoutBuffer
from voxline.base.clock import Clock
from voxline.base.daemon_calls import CallStuck, off_loop
from voxline.realtime.connection import WireObserver
from voxline.realtime.errors import ConfigurationError

from .capture import default_capture
from .link import Connector
from .local_barge import BargePolicy
from .mirror import ConversationMirror
from .reconnect import Backoff
from .session_args import check_session_arguments
from .settings import SessionSettings
from .tools import Approver, ToolRegistry

if TYPE_CHECKING:  # PortAudio is loaded only for devices
    from voxline.audio.devices import MicSource, SpeakerSink

__all__ = ["DEVICE_CLOSE_S", "DeviceSessionOptions", "SessionDevice", "close_devices", "open_on_devices"]

DEVICE_CLOSE_S = 10.0  # each device's close waits at most 2 s for its driver (stream, and one a reopen replaced)
_log = logging.getLogger("voxline.session")

S = TypeVar("S")


class DeviceSessionOptions(TypedDict, total=False):
    """The constructor's keywords :meth:`VoiceSession.on_devices` passes on (it wires input, output and the watch)."""

    tools: ToolRegistry | None
    approve: Approver | None
    clock: Clock | None
    raw_events: bool
    connector: Connector | None
    mirror: ConversationMirror | None
    backoff: Backoff | None
    on_wire: WireObserver | None
    aec: EchoCanceller | str | None
    local_vad: LocalVad | str | None
    barge_policy: BargePolicy | None
    run_tools: bool


class SessionDevice(Protocol):
    """A sound device a session starts when it opens and closes with it (a speaker, a microphone)."""

    def start(self) -> None: ...

    def close(self) -> None: ...


def open_on_devices(make: Callable[[SessionSettings, SpeakerSink, MicSource, DeviceSessionOptions], S],
                    settings: SessionSettings | None, input_device: int | str | None,
                    output_device: int | str | None, options: DeviceSessionOptions) -> S:
    """``make(settings, speaker, microphone, options)`` on devices opened here, which it owns once it returns; a
    ``TypeError`` or :class:`ConfigurationError` before any device is looked up for keywords it cannot take."""
    from voxline.audio.devices import MicSource, SpeakerSink  # PortAudio is loaded only for devices

    if "aec" not in options and "local_vad" not in options:
        chosen = default_capture()
        if isinstance(chosen, str):
            _log.info("on_devices: no echo cancellation: %s", chosen)
        else:
            options["aec"], options["local_vad"] = chosen

    # before a device is looked up: a keyword the constructor does not take, or one this wires itself
    unknown = sorted(set(options) - set(DeviceSessionOptions.__annotations__))
    if unknown:
        raise TypeError(f"VoiceSession.on_devices got {', '.join(map(repr, unknown))}: it takes the constructor's "
                        f"keywords but output, input and watch_devices, which it wires to the devices itself")
    check_session_arguments(settings=settings, **options)
    settings = settings or SessionSettings()
    if settings.call_id is not None:
        raise ConfigurationError("a session attached to a call (call_id) has no media of its own: on_devices "
                                 "opens a microphone and a speaker; use VoiceSession(settings) for a call")
    output_device = settings.output_device if output_device is None else output_device
    speaker = SpeakerSink(PlayoutBuffer(), device=output_device)
    mic: MicSource | None = None
    try:
        mic = MicSource(device=settings.input_device if input_device is None else input_device)
        return make(settings, speaker, mic, options)
    except BaseException:
        speaker.close()  # opened here, and nobody else will close them
        if mic is not None:
            mic.close()
        raise


async def close_devices(devices: Sequence[SessionDevice]) -> None:
    """Close a session's devices off the loop, on a daemon thread: a close waits for a stuck driver, the loop
    does not."""
    if not devices:
        return

    def close_each() -> None:
        for device in devices:
            device.close()

    try:
        await off_loop(close_each, timeout_s=DEVICE_CLOSE_S, name="voxline-device-close")
    except CallStuck:
        _log.warning("the sound devices did not close within %g s: left to their drivers", DEVICE_CLOSE_S)
