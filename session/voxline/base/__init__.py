"""The primitives every layer shares, on the lowest floor: they import nothing of voxline.

- :mod:`voxline.base.clock` — the one :class:`~voxline.base.clock.Clock` protocol, the real
  clock and the virtual one;
- :mod:`voxline.base.loop_share` — turns for bulk work on a busy event loop, a bounded number per pass;
- :mod:`voxline.base.audio_format` — the one :class:`~voxline.base.audio_format.AudioFormat`
  and the pipeline's one sample rate, :data:`~voxline.base.audio_format.SAMPLE_RATE`;
- :mod:`voxline.base.errors` — the root of the exception tree and :class:`AudioError`;
- :mod:`voxline.base.redaction` — keys and tokens kept out of messages, logs and URLs as shown;
- :mod:`voxline.base.shown` — text as a person sees it: redacted, clipped, control characters escaped;
- :mod:`voxline.base.models` — the default realtime and transcription model names;
- :mod:`voxline.base.arguments` — constructors' argument checks, one line naming the argument;
- :mod:`voxline.base.cli_numbers` — a command-line option's number, refused in one line;
- :mod:`voxline.base.contain`, :mod:`voxline.base.files`, :mod:`voxline.base.set_aside`,
  :mod:`voxline.base.collector` — where an application's exception stops, writing a file whole, the last run's
  files kept until a run began, and the cyclic collector's policy;
- :mod:`voxline.base.loop_runner` — an event loop run from synchronous code that closes without waiting
  for ever on a task that ignores its cancel.
"""
