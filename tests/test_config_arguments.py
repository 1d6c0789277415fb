"""The local server's configuration refuses, at construction and in one line, what would break its sessions later.

Each of these values used to pass the constructor and ``serve()`` and then fail every
connection (HTTP 500, close 1011, a reply that never came) or mean something else.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from voxline.base.arguments import flag, real, text, whole
from voxline.realtime.errors import ConfigurationError
from voxline.realtime.server import ServerConfig
from voxline.realtime.server.live.settings import LiveConfig
from voxline.realtime.server.net.config import FaultConfig


@pytest.mark.parametrize(("given", "message"), [
    ({"port": "8765"}, "port takes a whole number, not str"),
    ({"port": True}, "port takes a whole number, not bool"),
    ({"port": 8765.5}, "port takes a whole number, not float"),
    ({"port": 70000}, "port takes a whole number ≥ 0 and ≤ 65535, not 70000"),
    ({"host": None}, "host takes a string, not NoneType"),
    ({"host": "[::1]"}, "host takes an address without brackets ('::1'), not '[::1]'"),
    ({"response_latency_s": math.nan}, "response_latency_s takes a finite number, not nan"),
    ({"response_latency_s": -1}, "response_latency_s takes a number ≥ 0, not -1"),
    ({"speed": -math.inf}, "speed takes a number > 0, not -inf"),
    ({"chunk_ms": 2.5}, "chunk_ms takes a whole number, not float"),
    ({"max_frame_bytes": 1.5}, "max_frame_bytes takes a whole number, not float"),
    ({"transcripts": "hello"}, "transcripts takes a list of strings, one per user turn, not str"),
    ({"transcripts": [1, None]}, "each of transcripts takes a string, not int"),
    ({"faults": None}, "faults takes a FaultConfig, not NoneType"),
    ({"clock": 5}, "clock takes a Clock (RealClock, VirtualClock), not int"),
    ({"on_wire": 5}, "on_wire takes a function of (direction, text), not int"),
    ({"seed": "abc"}, "seed takes a whole number, not str"),
    ({"voice": None}, "voice takes a string, not NoneType"),
    ({"scenario": ""}, "scenario takes a non-empty string"),
    ({"reuse_port": "no"}, "reuse_port takes True or False, not str"),
    ({"max_calls": 0}, "max_calls (WebRTC calls at once) takes a whole number ≥ 1, not 0"),
    ({"max_calls": 2.0}, "max_calls (WebRTC calls at once) takes a whole number, not float"),
])
def test_a_server_config_that_could_not_work_is_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        ServerConfig(**given)
    assert str(refused.value) == f"ServerConfig: {message}"


def test_a_key_of_the_wrong_kind_is_named_but_never_shown() -> None:
    with pytest.raises(ConfigurationError) as refused:
        ServerConfig(api_key=["sk-secret-value"])  # type: ignore[arg-type]
    assert str(refused.value) == "ServerConfig: api_key takes a string, not list"


def test_transcripts_given_as_a_list_are_kept_as_a_tuple() -> None:
    assert ServerConfig(transcripts=["one", ""]).transcripts == ("one", "")  # type: ignore[arg-type]


@pytest.mark.parametrize(("given", "message"), [
    ({"close_code": 99999}, "close_code takes a whole number ≥ 1000 and ≤ 4999, not 99999"),
    ({"close_code": 1006}, "close_code takes a code a close frame may carry, not 1006"),
    ({"reject_first_connections": "x"}, "reject_first_connections takes a whole number, not str"),
    ({"send_delay_s": -1}, "send_delay_s takes a number ≥ 0, not -1"),
])
def test_a_fault_that_could_not_be_injected_is_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        FaultConfig(**given)
    assert str(refused.value) == f"FaultConfig: {message}"


@pytest.mark.parametrize(("given", "message"), [
    ({"vad_threshold": 50}, "vad_threshold takes a number ≥ 0 and ≤ 1, not 50"),
    ({"reply_latency_ms": math.nan}, "reply_latency_ms takes a whole number, not float"),
    ({"usage_every_s": math.inf}, "usage_every_s takes a finite number, not inf"),
    ({"close_on_text": 5}, "close_on_text takes a string, not int"),
    ({"frame_ms": 15}, "frame_ms takes 10..1000 ms in steps of 10, not 15"),
])
def test_a_live_config_that_could_not_work_is_one_line(given: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        LiveConfig(**given)
    assert str(refused.value) == f"LiveConfig: {message}"


def test_the_checks_accept_what_they_should() -> None:
    assert real(0, "x", low=0) == 0 and real(math.inf, "x", low=0, above=True, finite=False) == math.inf
    assert whole(0, "x", low=0, high=0) == 0 and text("a", "x") == "a" and text("", "x", empty=True) == ""
    assert flag(False, "x") is False
    assert ServerConfig(port=0, speed=math.inf, seed=7, scenario="long").port == 0
