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


def _trickled_body(connection: socket.socket, stop: threading.Event) -> None:
    """Reads the request, sends the head of a 100 kB answer, then its body a byte every 50 ms, never finishing it."""
    connection.recv(65536)
    connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 100000\r\n\r\n")
    while not stop.wait(0.05):
        connection.sendall(b"v")


def _stalled_body(connection: socket.socket, stop: threading.Event) -> None:
    """Reads the request, sends the head of a 1,000-byte answer and ten bytes of its body, and waits."""
    connection.recv(65536)
    connection.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/sdp\r\nContent-Length: 1000\r\n\r\n"
                       + b"v=0\r\no=- 1")
    stop.wait(30)


async def test_an_answer_still_coming_at_the_deadline_is_given_up_on_not_taken_as_cut_off(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Late, the awaited POST shut the socket before it looked for an outcome: the read that ended then could hand
    in the part of the body it had first (taken as the whole answer, or as one the server cut off). Shutting the
    socket here waits for the exchange's thread to hand in what it has, the worst order for the check."""
    from voxline.realtime.transports import http

    shut = http._Connections.shut

    def shut_and_let_the_read_end(self: http._Connections) -> None:
        shut(self)
        for thread in [t for t in threading.enumerate() if t.name == "voxline-http-post"]:
            thread.join(10)

    monkeypatch.setattr(http._Connections, "shut", shut_and_let_the_read_end)
    with raw_server(_trickled_body) as url:
        with pytest.raises(ConnectionFailed) as failed:
            async with asyncio.timeout(15):  # a bound, not a timing
                await post_async(url, KEY, b"v=0", "application/sdp", timeout=1)
    assert str(failed.value) == f"{url} sent no complete answer within 1 s"


def test_an_answer_whose_body_stops_coming_is_not_called_one_that_never_began() -> None:
    with raw_server(_stalled_body) as url:
        failure = _within(15, lambda: post(url, KEY, b"v=0", "application/sdp", timeout=0.3))
    assert isinstance(failure, ConnectionFailed)
    assert str(failure) == f"{url} began its answer but sent no more of it within 0.3 s"


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


def _read_request(connection: socket.socket) -> None:
    """Reads a request whole (its head and its Content-Length of body): closed with some of it unread, the
    connection would be reset rather than ended."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    while len(body) < length:
        body += connection.recv(65536)


def _answering(head: bytes, body: bytes) -> Callable[[socket.socket, threading.Event], None]:
    """Reads the request, sends ``head`` and ``body``, and ends the connection."""
    def answer(connection: socket.socket, stop: threading.Event) -> None:
        _read_request(connection)
        connection.sendall(head + b"\r\n\r\n" + body)
    return answer


_SDP = b"v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"
_CREATED = b"HTTP/1.1 201 Created\r\nLocation: /v1/realtime/calls/rtc_1\r\nConnection: close"
_BIG = 1024 * 1024 + 10  # over the 1 MiB an answer's body is cut to


@pytest.mark.parametrize(("head", "body", "said"), [
    (_CREATED + b"\r\nContent-Length: 500", _SDP, f"ended after {len(_SDP)} of 500 bytes"),
    (_CREATED + b"\r\nContent-Length: 500", b"", "ended after 0 of 500 bytes"),
    (_CREATED + b"\r\nContent-Length: %d" % _BIG, _SDP, f"ended after {len(_SDP)} of {_BIG} bytes"),
    (_CREATED + b"\r\nTransfer-Encoding: chunked", b"%x\r\n" % len(_SDP) + _SDP + b"\r\n",
     "ended before its chunked body did"),
], ids=["short", "nothing", "short-of-more-than-the-cap", "chunked"])
def test_an_answer_the_connection_cut_off_before_its_end_is_a_one_line_failure(head: bytes, body: bytes,
                                                                               said: str) -> None:
    """Before, http.client handed back the part that came as if it were the whole answer (the chunked one was
    "sent no valid HTTP answer: IncompleteRead")."""
    with raw_server(_answering(head, body)) as url:
        with pytest.raises(ConnectionFailed) as caught:
            post(url, KEY, b"{}", "application/json", timeout=5)
    assert str(caught.value) == f"the answer from {url} {said}"


@pytest.mark.parametrize(("head", "body", "kept"), [
    (_CREATED + b"\r\nContent-Length: %d" % len(_SDP), _SDP, _SDP),
    (_CREATED + b"\r\nContent-Length: %d" % _BIG, b"v" * _BIG, b"v" * (1024 * 1024)),  # whole, kept up to the cap
    (_CREATED + b"\r\nTransfer-Encoding: chunked", b"%x\r\n" % len(_SDP) + _SDP + b"\r\n0\r\n\r\n", _SDP),
    (_CREATED, _SDP, _SDP),  # no length: the body ends with the connection
], ids=["whole", "over-the-cap", "chunked", "no-length"])
def test_a_whole_answer_is_taken_whatever_says_where_it_ends(head: bytes, body: bytes, kept: bytes) -> None:
    with raw_server(_answering(head, body)) as url:
        answer = post(url, KEY, b"{}", "application/json", timeout=5)
    assert (answer.status, answer.body, answer.location) == (201, kept, "/v1/realtime/calls/rtc_1")


def test_an_error_answer_whose_body_was_cut_off_says_so_with_its_status() -> None:
    body = b'{"error": {"message": "over capacity"}}'
    head = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 500\r\nConnection: close"
    with raw_server(_answering(head, body)) as url:
        with pytest.raises(ConnectionFailed) as caught:
            post(url, KEY, b"{}", "application/json", timeout=5)
    assert str(caught.value) == f"{url} answered HTTP 503 and broke off its body"


async def test_a_webrtc_offer_whose_sdp_answer_was_cut_off_says_so_at_connect() -> None:
    """Before, the part of the SDP answer that came was applied as the answer, and the call failed on what it
    lacked ("no m=audio section")."""
    with raw_server(_answering(_CREATED + b"\r\nContent-Length: 4000", _SDP)) as url:
        base = url.rsplit("/v1/", 1)[0] + "/v1"
        with pytest.raises(ConnectionFailed) as caught:
            await WebRTCTransport.connect(base, KEY, open_timeout=10)
    message = str(caught.value)
    assert message.startswith("the answer from http://127.0.0.1:") and message.endswith(f"ended after {len(_SDP)} of "
                                                                                         "4000 bytes")
    assert "\n" not in message and KEY not in message
