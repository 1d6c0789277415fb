"""What the tests share: helpers, fakes and fixtures that test modules import.

Test modules import from here and nowhere else in ``tests`` (never another test module, never
``conftest``); ``tests/conftest.py`` holds only the suite's fixtures and hooks.

* ``ci``: CI or not, the system packages, skip-or-fail on a missing tool;
* ``cli``: the installed ``voxline`` command and its one-line errors;
* ``oracle``: every wire event checked against the official ``openai`` package;
* ``protocol_frames``, ``server_events``, ``reply_frames``: frames and events fed to the client side;
* ``engine_harness``, ``local_server``: the local server's engine by hand, and over loopback;
* ``session_events``: waiting on a live session's events;
* ``speech``, ``heard``, ``replays``: speech fixtures, and finding what was heard of them;
* ``hostile``, ``fault_matrix``: faults injected into a conversation, and the table of survivors;
* ``farm``: recordings for replay farms;
* ``loopback_http``: a plain HTTP server on loopback;
* ``browser``: headless Chromium over the DevTools protocol (pages, JS, console, screenshots, fake microphone);
* ``virtual_devices``, ``devices``: PulseAudio's virtual sound devices, and their fixtures.
"""
