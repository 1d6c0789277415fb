"""Real sound devices through PortAudio: listing, the speaker sink and the microphone source.

* :mod:`voxline.audio.device_list` — :class:`DeviceInfo`, :func:`list_devices`, :func:`resolve_device`
  (one-line :class:`~voxline.base.errors.AudioError` naming the available devices).
* :mod:`voxline.audio.device_speaker` — :class:`SpeakerSink`: plays a playout buffer; its DAC
  timeline is the heard ledger's; a barge-in aborts and restarts the stream so revoked
  samples never play.
* :mod:`voxline.audio.device_mic` — :class:`MicSource`: timestamped capture blocks into asyncio.
* :mod:`voxline.audio.device_timing`, :mod:`voxline.audio.device_resample` — DAC timeline and rate adapters.

PortAudio is loaded on first use; without it every entry point raises an AudioError that
says to install libportaudio2.
"""

from __future__ import annotations

from voxline.audio.device_list import DeviceInfo, Kind, Latency, list_devices, refresh_devices, resolve_device
from voxline.audio.device_mic import MicSource
from voxline.audio.device_speaker import SpeakerSink

__all__ = [
    "DeviceInfo",
    "Kind",
    "Latency",
    "MicSource",
    "SpeakerSink",
    "list_devices",
    "refresh_devices",
    "resolve_device",
]
