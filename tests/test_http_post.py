"""The one HTTP POST (client secrets, WebRTC offers, GPT-Live sessions): a deadline for the whole exchange, and
one line that says which part of it failed."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from voxline.realtime.errors import ConfigurationError, ConnectionFailed
from voxline.realtime.transports.http import post, post_async
from voxline.realtime.transports.webrtc import WebRTCTransport

KEY = "sk-test-http-post-canary"


@contextlib.contextmanager
def raw_server(answer: Callable[[socket.socket, threading.Event], None]) -> Iterator[str]:
    """A TCP server on loopback that hands each connection to ``answer`` (told to stop by the event); its URL."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.05)  # so that the acceptor sees the stop
    stop = threading.Event()
    threads: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connection.settimeout(None)
            thread = threading.Thread(target=_serve, args=(answer, connection, stop), daemon=True)
            threads.append(thread)
            thread.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/realtime/client_secrets"
    finally:
        stop.set()
        listener.close()
        acceptor.join(5)
        for thread in threads:
            thread.join(5)


def _serve(answer: Callable[[socket.socket, threading.Event], None], connection: socket.socket,
           stop: threading.Event) -> None:
    with connection:
        with contextlib.suppress(OSError):
            answer(connection, stop)


def _trickle(connection: socket.socket, stop: threading.Event) -> None:
    """Reads the request, then sends a status line one byte every 50 ms, never finishing it."""
    connection.recv(65536)
    for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100_000:
        if stop.wait(0.05):
            return
        connection.sendall(bytes([byte]))


def _mute(connection: socket.socket, stop: threading.Event) -> None:
    """Reads the request and never answers."""
    connection.recv(65536)
    stop.wait(30)


def _within(seconds: float, call: Callable[[], object]) -> BaseException:
    """What ``call`` raised, failing the test if it has not returned after ``seconds`` (a bound, not a timing)."""
    raised: list[BaseException] = []

    def run() -> None:
        try:
            call()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"the POST was still waiting after {seconds} s"
    assert raised, "the POST returned an answer"
    return raised[0]


def test_an_answer_trickled_a_byte_at_a_time_is_given_up_on_at_the_deadline_and_its_thread_ends() -> None:
    """Before, the POST waited for as long as bytes came; and then, given up on, its thread read on as long."""
    with raw_server(_trickle) as url:
        failure = _within(15, lambda: post(url, KEY, b"{}", "application/json", timeout=0.5))
        assert isinstance(failure, ConnectionFailed)
        assert str(failure) == f"{url} sent no complete answer within 0.5 s"
        for thread in [t for t in threading.enumerate() if t.name == "voxline-http-post"]:
            thread.join(10)  # its socket was shut: it ends at once, while the server still trickles
            assert not thread.is_alive()


def test_a_server_that_takes_the_request_and_says_nothing_is_not_called_a_connect_timeout() -> None:
    with raw_server(_mute) as url:
        failure = _within(15, lambda: post(url, KEY, b"{}", "application/json", timeout=0.5))
    assert isinstance(failure, ConnectionFailed)
    assert str(failure) == f"{url} took the request but sent no answer within 0.5 s"  # not "connect timed out"


@pytest.mark.parametrize("key", ["sk-abc\u2013def", "sk-caf\u00e9", "\u201csk-quoted\u201d"])
def test_a_key_with_a_character_that_is_not_ascii_is_refused_without_showing_it(key: str) -> None:
    with pytest.raises(ConfigurationError) as refused:
        post("http://127.0.0.1:9/v1/realtime/client_secrets", key, b"{}", "application/json", timeout=1)
    assert "not ASCII" in str(refused.value) and "URL" not in str(refused.value)
    assert key not in str(refused.value) and key.strip("\u201c\u201d") not in str(refused.value)


def _heard_then_mute(heard: threading.Event) -> Callable[[socket.socket, threading.Event], None]:
    """Reads the request, says so on ``heard``, and never answers."""
    def answer(connection: socket.socket, stop: threading.Event) -> None:
        connection.recv(65536)
        heard.set()
        stop.wait(30)
    return answer


async def _heard(heard: threading.Event) -> None:
    async with asyncio.timeout(10):  # a bound on the wait, not a timing
        while not heard.is_set():
            await asyncio.sleep(0.01)


def _posts_left() -> list[threading.Thread]:
    """The exchange threads still running once each had a generous while to end."""
    for thread in [t for t in threading.enumerate() if t.name == "voxline-http-post"]:
        thread.join(5)
    return [t for t in threading.enumerate() if t.name == "voxline-http-post" and t.is_alive()]


async def test_a_cancelled_post_breaks_off_its_request_and_its_thread_ends() -> None:
    heard = threading.Event()
    with raw_server(_heard_then_mute(heard)) as url:
        waiting = asyncio.create_task(post_async(url, KEY, b"{}", "application/json", timeout=60))
        await _heard(heard)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert _posts_left() == []  # while the server still holds the request


async def test_a_webrtc_open_cancelled_while_its_offer_waits_leaves_no_request_or_thread_behind() -> None:
    """Before, the offer's POST ran on in an executor thread for as long as the open's timeout: the session's close
    returned, but the request carrying the key outlived it, and asyncio.run and the interpreter's exit waited for
    it (a Ctrl-C while connecting took seconds to exit)."""
    heard = threading.Event()
    with raw_server(_heard_then_mute(heard)) as url:
        opening = asyncio.create_task(WebRTCTransport.connect(url.rsplit("/v1/", 1)[0] + "/v1", KEY, open_timeout=60))
        await _heard(heard)
        opening.cancel()
        with pytest.raises(asyncio.CancelledError):
            await opening
        assert _posts_left() == []
