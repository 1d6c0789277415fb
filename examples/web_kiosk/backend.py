"""The browser kiosk's backend: serves the page, mints its ephemeral key, runs the tools on the call's sideband.

Run it from the repository root with voxline installed (in a clone, ``python3`` below is ``uv run --no-dev python``;
the folders install as one ``voxline`` namespace, so ``PYTHONPATH=.`` is not enough)::

    python3 examples/web_kiosk/backend.py            # starts the built-in local server too
    python3 examples/web_kiosk/backend.py --url http://127.0.0.1:8765/v1 --api-key sk-…

then open the address it prints in a browser and press *Start*.

The split, as a deployment would have it (the same as ``examples/kiosk_sideband.py``, with a
browser in place of the Python kiosk):

* ``POST /session``: the backend, which holds the API key, mints a short-lived ephemeral key
  (``POST /v1/realtime/client_secrets``) and hands only that to the page, with the API's address;
* the page opens the WebRTC call itself (``POST /v1/realtime/calls`` with the ephemeral key;
  microphone and speaker are media tracks, events on the ``oai-events`` data channel) and reads
  the call's id from the answer's ``Location`` header;
* ``POST /calls/{call_id}``: the page names its call, and the backend attaches to it over the
  sideband (``/v1/realtime?call_id=…`` with the API key) with a voxline session that holds the
  tools and no media. Tool calls run here, once, and their outputs go back over the sideband;
* ``GET /status``: the calls attached and ended, and the tools run (for an operator, and the tests).

Both ``POST`` endpoints take no body (the page sends none); one that is there must be a JSON object
of at most 16 KiB (its fields are ignored), or the answer is a 400 or 413, before any key is minted.
Every answer is JSON: a method a path does not take is a 405.

A real deployment would check that the page asking to attach is the one that opened the call
(a kiosk login, or a key minted per kiosk); this example trusts loopback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.server
import json
import os
import re
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from voxline.base.errors import VoxlineError, message_of
from voxline.base.shown import clip, shown_value
from voxline.realtime.errors import ConnectionFailed
from voxline.realtime.server import ServerConfig, serve
from voxline.session.cli.secret import mint_client_secret
from voxline.session.settings import SessionSettings
from voxline.session.tools import ToolFinished, ToolRegistry
from voxline.session.voice import VoiceSession

HERE = Path(__file__).resolve().parent
LOCAL_KEY = "sk-local-web-kiosk"
INSTRUCTIONS = "You help visitors at a kiosk. Use get_weather for the weather."
_FILES = {"/": "index.html", "/index.html": "index.html", "/kiosk.js": "kiosk.js", "/kiosk.css": "kiosk.css"}
_TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css"}
_CALL_PATH = re.compile(r"/calls/([A-Za-z0-9_-]{1,128})")
MAX_BODY = 16 * 1024  # a POST's body, at most: the page sends none
_DRAIN = 16 * 1024 * 1024  # a longer body is read and dropped, up to this, so its sender reads the 413


class Refused(VoxlineError):
    """A request answered with ``status`` and a one-line ``error``, before the backend did anything for it."""

    def __init__(self, status: int, error: str, allow: str | None = None) -> None:
        super().__init__(error)
        self.status, self.allow = status, allow


def kiosk_tools() -> ToolRegistry:
    """The tools only the backend can run (canned data here)."""
    tools = ToolRegistry()

    @tools.tool(read_only=True)
    def get_weather(city: str, unit: str = "celsius") -> dict[str, Any]:
        """Demo weather for a city: canned data, not a real forecast.

        Args:
            city: the city name.
            unit: celsius or fahrenheit.
        """
        return {"city": city, "temperature": 21, "unit": unit, "conditions": "clear"}

    return tools


STATUS_KEEPS = 100  # calls, ended calls and tool runs /status shows, the newest


class Backend:
    """The API's address and key, the sideband sessions attached, and the tools they ran."""

    def __init__(self, api_url: str, api_key: str, model: str) -> None:
        self.api_url = api_url.rstrip("/")
        self._api_key = SecretStr(api_key)
        self.model = model
        # the newest of each for /status: a kiosk runs for weeks, a call at a time
        self.calls: deque[str] = deque(maxlen=STATUS_KEEPS)
        self.ended: deque[str] = deque(maxlen=STATUS_KEEPS)
        self.tool_runs: deque[dict[str, Any]] = deque(maxlen=STATUS_KEEPS)
        self._tasks: set[asyncio.Task[None]] = set()
        self._attached: dict[str, asyncio.Future[None]] = {}  # by call: attached, or being attached
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # never the key
        return f"<Backend {self.api_url} calls={len(self.calls)}>"

    @property
    def ws_url(self) -> str:
        return "ws" + self.api_url.removeprefix("http")

    def mint(self) -> dict[str, Any]:
        """An ephemeral key for the page, and where to use it; the API key stays here."""
        secret = mint_client_secret(self.api_url, self._api_key.get_secret_value(), model=self.model, ttl=600)
        return {"value": secret["value"], "expires_at": secret.get("expires_at"), "url": self.api_url, "model": self.model}

    def status(self) -> dict[str, Any]:
        with self._lock:
            return {"calls": list(self.calls), "ended": list(self.ended), "tool_runs": list(self.tool_runs)}

    async def attach(self, call_id: str) -> None:
        """Attach to ``call_id`` over the sideband; return once attached, then serve the call in the background.

        Once per call: a page that asks again (a retry, a double click) waits for the same attach. A second
        sideband would run every tool call of the call a second time. A call is forgotten when its sideband ends."""
        attached = self._attached.get(call_id)
        if attached is None or (attached.done() and attached.exception() is not None):
            attached = self._attached[call_id] = asyncio.get_running_loop().create_future()
            task = asyncio.create_task(self._serve_call(call_id, attached), name=f"sideband {call_id}")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        await asyncio.shield(attached)

    async def _serve_call(self, call_id: str, attached: asyncio.Future[None]) -> None:
        # the default reconnect budget: a network blip is survived, and a call that ended refuses the first try (404)
        settings = SessionSettings(url=self.ws_url, api_key=self._api_key, call_id=call_id, instructions=INSTRUCTIONS)
        try:
            async with VoiceSession(settings, tools=kiosk_tools()) as session:
                with self._lock:
                    self.calls.append(call_id)
                attached.set_result(None)
                async for event in session:
                    if isinstance(event, ToolFinished):
                        with self._lock:
                            self.tool_runs.append({"call": call_id, "name": event.name, "output": event.output,
                                                   "ok": event.ok})
                        print(f"backend: {event.name} ran for call {call_id} -> {event.output}", flush=True)
            with self._lock:  # the call ended: the server closed its sideband
                self.ended.append(call_id)
        except Exception as exc:  # the page learns it from its request; the backend goes on serving
            if not attached.done():
                attached.set_exception(exc)
            else:
                print(f"backend: the sideband of {call_id} ended: {message_of(exc)}", file=sys.stderr, flush=True)
        finally:  # its waiters hold the future: the entry goes, or a kiosk running for weeks keeps every call's
            if self._attached.get(call_id) is attached:
                del self._attached[call_id]

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


def handler_for(backend: Backend, run: Callable[[Any], Any]) -> type[http.server.BaseHTTPRequestHandler]:
    """The HTTP handler class; ``run`` runs a coroutine on the backend's event loop and returns its result."""

    class Handler(http.server.BaseHTTPRequestHandler):
        timeout = 30  # a client that stops sending mid-request does not hold its thread for ever

        def do_GET(self) -> None:  # every method: a path takes one, and says which when asked another
            path = self.path.partition("?")[0]
            try:
                self._allowed(path)
                if self.command == "POST":
                    self._body()  # read whole before anything is done: unread, it resets the connection
                if path == "/status":
                    self._json(200, backend.status())
                elif path in _FILES:
                    file = HERE / _FILES[path]
                    self._send(200, file.read_bytes(), _TYPES[file.suffix])
                elif path == "/session":
                    self._json(200, backend.mint())
                else:
                    run(backend.attach(call_id := path.removeprefix("/calls/")))
                    self._json(200, {"attached": call_id})
            except Refused as refused:
                self._json(refused.status, {"error": refused.message}, refused.allow)
            except Exception as exc:  # one line for the page; the API key is never in it
                unknown = isinstance(exc, ConnectionFailed) and exc.status == 404  # no such call (or it ended)
                self._json(404 if unknown else 502, {"error": f"{type(exc).__name__}: {message_of(exc)}"})

        do_POST = do_HEAD = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_GET

        def _allowed(self, path: str) -> None:
            """Nothing if ``path`` takes the request's method; else the 404 or 405 to answer."""
            takes = "GET" if path == "/status" or path in _FILES else "POST" if (
                path == "/session" or _CALL_PATH.fullmatch(path)) else None
            if takes is None:
                raise Refused(404, f"no such page {clip(path, 200)}")
            if self.command != takes:
                raise Refused(405, f"{clip(path, 200)} takes {takes}, not {clip(self.command, 20)}", takes)

        def _body(self) -> dict[str, Any]:
            """The request's JSON object ({} if it has no body), read whole; a body too long or not one is refused."""
            length = self.headers.get("Content-Length", "0").strip()
            if self.headers.get("Transfer-Encoding") is not None or not length.isdigit():
                self.close_connection = True  # what it sends is left unread
                raise Refused(400, f"a body needs a Content-Length, not {shown_value(length)}")
            size = int(length)
            if size > MAX_BODY:
                self.close_connection, left = True, size
                while 0 < left and size <= _DRAIN and (chunk := self.rfile.read(min(left, 65536))):
                    left -= len(chunk)  # read and dropped: unread, it would reset the answer on its way
                raise Refused(413, f"a body of {size} bytes; at most {MAX_BODY}")
            try:
                body = json.loads(raw) if (raw := self.rfile.read(size)).strip() else {}
            except ValueError as error:  # bad UTF-8 too
                raise Refused(400, f"the body is not JSON: {clip(message_of(error), 200)}") from None
            if not isinstance(body, dict):
                raise Refused(400, f"the body is a JSON {type(body).__name__}, not an object")
            return body

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """http.server's own refusals (a malformed request line, a method no handler has) in JSON too."""
            self.close_connection = True
            self._json(code, {"error": message or self.responses.get(code, ("",))[0] or f"HTTP {code}"})

        def _json(self, status: int, body: dict[str, Any], allow: str | None = None) -> None:
            self._send(status, json.dumps(body).encode(), "application/json", allow)

        def _send(self, status: int, payload: bytes, content_type: str, allow: str | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            if allow is not None:
                self.send_header("Allow", allow)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextlib.asynccontextmanager
async def running(backend: Backend, host: str = "127.0.0.1", port: int = 0) -> AsyncIterator[str]:
    """Serve the page and the endpoints on a thread until the block ends; yields the page's address."""
    loop = asyncio.get_running_loop()

    def run(coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, loop).result(30)

    server = http.server.ThreadingHTTPServer((host, port), handler_for(backend, run))
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
    thread.start()
    try:
        yield f"http://{host}:{server.server_address[1]}/"
    finally:
        await asyncio.to_thread(server.shutdown)
        server.server_close()
        await backend.aclose()


def port_number(text: str) -> int:
    """A TCP port, for argparse."""
    if not text.isdigit() or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"a port from 0 to 65535, not {text!r}")
    return int(text)


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="Realtime API base URL, e.g. http://127.0.0.1:8765/v1 "
                                      "(default: start the built-in local server)")
    parser.add_argument("--api-key", help="the API key (default $OPENAI_API_KEY; the built-in server's own key without --url)")
    parser.add_argument("--model", default="gpt-realtime-2.1", help="realtime model (default gpt-realtime-2.1)")
    parser.add_argument("--port", type=port_number, default=8080, help="the page's port (default 8080; 0 picks a free one)")
    parser.add_argument("--voice", default="tone", help="built-in server voice: tone (default), espeak or auto")
    args = parser.parse_args()
    async with contextlib.AsyncExitStack() as stack:
        if args.url:
            key = args.api_key or os.environ.get("OPENAI_API_KEY")
            if not key:
                print("web_kiosk: no API key (--api-key or OPENAI_API_KEY)", file=sys.stderr)
                return 2
            url = args.url
        else:
            key = LOCAL_KEY
            config = ServerConfig(port=0, voice=args.voice, api_key=key, scenario=str(HERE / "scenario.toml"), speed=4.0)
            server = await stack.enter_async_context(serve(config))
            url = server.http_url
            print(f"backend: the built-in local server at {url} (scripted replies, not a language model)", flush=True)
        try:
            page = await stack.enter_async_context(running(Backend(url, key, args.model), port=args.port))
        except OSError as error:  # the port is taken (8080 often is), or not this user's to bind
            print(f"web_kiosk: cannot serve the page on port {args.port}: {error.strerror or error} "
                  "(--port 0 picks a free one)", file=sys.stderr)
            return 1
        print(f"backend: the kiosk page is at {page}", flush=True)
        await asyncio.Event().wait()
    return 0


if __name__ == "__main__":
    try:
        with contextlib.suppress(KeyboardInterrupt):
            sys.exit(asyncio.run(main()))
    except VoxlineError as error:  # a setting the built-in server refuses (--voice), said in one line
        sys.exit(f"web_kiosk: error: {error}")
