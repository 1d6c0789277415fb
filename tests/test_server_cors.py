"""The local server's cross-origin answers: a browser page posts its SDP offer and reads ``Location``."""

from __future__ import annotations

import asyncio
import http.client

from voxline.realtime.server import ServerConfig, serve
from voxline.realtime.server.engine.cors import preflight, with_cors
from voxline.realtime.server.engine.http_message import HttpRequest, HttpResponse

KEY = "sk-local-cors-test"


def _request(method: str, headers: dict[str, str] | None = None) -> HttpRequest:
    return HttpRequest(method, "/v1/realtime/calls", "", headers or {}, b"")


def test_a_preflight_allows_any_origin_and_the_headers_asked_for() -> None:
    asked = {"access-control-request-method": "POST", "access-control-request-headers": "authorization,content-type"}
    answer = preflight(_request("OPTIONS", asked))
    assert answer.status == 204 and answer.body == b""
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    assert "POST" in answer.headers["Access-Control-Allow-Methods"]
    assert answer.headers["Access-Control-Allow-Headers"] == "authorization,content-type"
    assert b"HTTP/1.1 204 No Content\r\n" in answer.encode()


def test_a_preflight_echoes_only_header_names() -> None:
    injected = {"access-control-request-headers": "authorization\r\nSet-Cookie: x=1"}
    assert "Access-Control-Allow-Headers" not in preflight(_request("OPTIONS", injected)).headers


def test_every_answer_exposes_location_and_keeps_its_own_headers() -> None:
    answer = with_cors(HttpResponse(201, b"v=0", content_type="application/sdp", headers={"Location": "/x/rtc_1"}))
    assert answer.headers["Location"] == "/x/rtc_1"
    assert answer.headers["Access-Control-Allow-Origin"] == "*"
    assert answer.headers["Access-Control-Expose-Headers"] == "Location"
    assert answer.status == 201 and answer.content_type == "application/sdp"


async def test_the_server_answers_a_browsers_preflight_and_its_errors_cross_origin() -> None:
    async with serve(ServerConfig(port=0, voice="tone", api_key=KEY)) as server:

        def ask(method: str, headers: dict[str, str]) -> http.client.HTTPResponse:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request(method, "/v1/realtime/calls?model=gpt-realtime-2.1", body=b"", headers=headers)
            answer = connection.getresponse()
            answer.read()
            connection.close()
            return answer

        origin = {"Origin": "http://127.0.0.1:1"}
        asked = {**origin, "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization"}
        preflight_answer = await asyncio.to_thread(ask, "OPTIONS", asked)
        assert preflight_answer.status == 204
        assert preflight_answer.getheader("Access-Control-Allow-Origin") == "*"
        assert preflight_answer.getheader("Access-Control-Allow-Headers") == "authorization"
        refused = await asyncio.to_thread(ask, "POST", {**origin, "Authorization": "Bearer wrong"})
        assert refused.status == 401  # the page can read why it was refused
        assert refused.getheader("Access-Control-Allow-Origin") == "*"
