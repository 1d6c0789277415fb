"""GPT-Live on the local server (``/v1/live/sessions``).

The sans-I/O side: :mod:`.engine` (one session: frames and caller audio in, events out),
:mod:`.speaker` (what is said on the output track, what waits), :mod:`.track` (utterances and
their words), :mod:`.backend` (a scripted Responses backend), :mod:`.settings`, :mod:`.schema`,
:mod:`.audio`, :mod:`.errors`. The network side: :mod:`.ws` (WebSocket sessions and sidebands),
:mod:`.rtc` (WebRTC), :mod:`.hub` (running and stored sessions), :mod:`.routes` (the endpoints,
hooked into the server by path).
"""
