"""Headless Chromium driven over the DevTools protocol: open a page, run JS in it, watch its console.

Nothing downloads a browser: the system's ``chromium`` runs with flags that keep it off the network,
a fresh profile directory, and optionally a WAV as its fake microphone. One WebSocket to the browser
carries every command; each page is a target attached in flat mode (its commands carry a session id).

``launch`` is the async API (pytest-asyncio tests); ``SyncBrowser`` runs the same on a private event
loop thread for plain synchronous tests. Call ``require_chromium()`` first: it skips where Chromium is
missing, except in CI where the test must run.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import re
import shutil
import tempfile
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from websockets.asyncio.client import ClientConnection, connect

from tests.support.ci import require_tool

__all__ = [
    "BASE_FLAGS",
    "Browser",
    "BrowserError",
    "ConsoleMessage",
    "JSError",
    "Page",
    "SyncBrowser",
    "SyncPage",
    "chromium_command",
    "launch",
    "require_chromium",
]

# What keeps a headless Chromium quiet, local and self-contained: no sandbox (CI runs as root), no GPU,
# nothing fetched in the background (QUIC probes, component updates, sync, first-run pages), and media
# playing without a user gesture.
BASE_FLAGS: tuple[str, ...] = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--metrics-recording-only",
    "--password-store=basic",
    "--use-mock-keychain",
    "--autoplay-policy=no-user-gesture-required",
)
_LISTENING = re.compile(rb"DevTools listening on (ws://\S+)")
_STDERR_KEPT = 60


class BrowserError(RuntimeError):
    """Chromium did not start, a DevTools command failed, or a wait ran out; the message says which."""


class JSError(BrowserError):
    """JavaScript evaluated in the page threw (or its promise rejected)."""


@dataclass(frozen=True)
class ConsoleMessage:
    """One line of the page's console (``console.log`` and friends, or a browser log entry)."""

    level: str  # log, info, warning, error, debug… (the protocol's words)
    text: str


def require_chromium() -> str:
    """The Chromium executable's path; skips the test where it is missing, fails in CI."""
    require_tool("chromium")
    path = shutil.which("chromium")
    assert path is not None
    return path


def chromium_command(
    executable: str,
    profile: Path,
    *,
    fake_audio: Path | None = None,
    loop_audio: bool = True,
    window_size: tuple[int, int] = (1280, 800),
    extra_flags: Sequence[str] = (),
) -> list[str]:
    """The command line ``launch`` runs: base flags, a fresh profile, a DevTools port chosen by the OS."""
    command = [executable, *BASE_FLAGS, f"--user-data-dir={profile}", "--remote-debugging-port=0"]
    command.append(f"--window-size={window_size[0]},{window_size[1]}")
    if fake_audio is not None:
        source = str(Path(fake_audio).resolve()) + ("" if loop_audio else "%noloop")
        command += [
            "--use-fake-ui-for-media-stream",
            "--use-fake-device-for-media-stream",
            f"--use-file-for-fake-audio-capture={source}",
        ]
    command += list(extra_flags)
    command.append("about:blank")
    return command


def _remote_object_text(details: dict[str, Any]) -> str:
    """A one-line description of a thrown exception from the protocol's ``exceptionDetails``."""
    exception = details.get("exception") or {}
    text = exception.get("description") or exception.get("value") or details.get("text") or "exception"
    return str(text)


def _console_text(args: list[dict[str, Any]]) -> str:
    parts = []
    for arg in args:
        if "value" in arg:
            value = arg["value"]
            parts.append(value if isinstance(value, str) else json.dumps(value))
        else:
            parts.append(str(arg.get("description", arg.get("type", ""))))
    return " ".join(parts)


@dataclass
class Page:
    """One tab: navigate, evaluate JS, wait on a JS condition, take a screenshot, read its console."""

    _browser: Browser
    target_id: str
    session_id: str
    console: list[ConsoleMessage] = field(default_factory=list)
    exceptions: list[str] = field(default_factory=list)
    _load_waiters: list[asyncio.Future[None]] = field(default_factory=list)

    async def send(self, method: str, params: dict[str, Any] | None = None, timeout: float = 20.0) -> dict[str, Any]:
        """A raw DevTools command in this page's session."""
        return await self._browser.send(method, params, session_id=self.session_id, timeout=timeout)

    async def goto(self, url: str, timeout: float = 20.0) -> None:
        """Navigate and wait for the page's load event."""
        loaded: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._load_waiters.append(loaded)
        try:
            result = await self.send("Page.navigate", {"url": url}, timeout=timeout)
            if result.get("errorText"):
                raise BrowserError(f"navigating to {url} failed: {result['errorText']}")
            async with asyncio.timeout(timeout):
                await loaded
        except TimeoutError:
            raise BrowserError(f"{url} did not finish loading within {timeout:g} s") from None
        finally:
            if loaded in self._load_waiters:
                self._load_waiters.remove(loaded)

    async def evaluate(self, expression: str, timeout: float = 20.0) -> Any:
        """The JSON value of ``expression`` in the page, awaiting it if it is a promise; ``JSError`` if it throws."""
        result = await self.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True, "userGesture": True},
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            raise JSError(f"{_remote_object_text(result['exceptionDetails'])} (evaluating {expression[:80]!r})")
        return result.get("result", {}).get("value")

    async def wait_for(self, condition: str, timeout: float = 10.0, interval: float = 0.05) -> Any:
        """Poll the JS ``condition`` until it is truthy; returns its value, ``BrowserError`` when time runs out."""
        deadline = asyncio.get_running_loop().time() + timeout
        last: Any = None
        while True:
            last = await self.evaluate(condition, timeout=max(timeout, 1.0))
            if last:
                return last
            if asyncio.get_running_loop().time() >= deadline:
                recent = "; ".join(f"{m.level}: {m.text}" for m in self.console[-5:])
                raise BrowserError(
                    f"waited {timeout:g} s for {condition!r}, last value {last!r}"
                    + (f"; console: {recent}" if recent else "")
                    + (f"; exceptions: {self.exceptions[-3:]}" if self.exceptions else "")
                )
            await asyncio.sleep(interval)

    async def screenshot(self, path: Path | None = None, full_page: bool = False) -> bytes:
        """The page as PNG bytes (written to ``path`` too when given)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            metrics = await self.send("Page.getLayoutMetrics")
            size = metrics.get("cssContentSize") or metrics["contentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        result = await self.send("Page.captureScreenshot", params)
        png = base64.b64decode(result["data"])
        if path is not None:
            Path(path).write_bytes(png)
        return png

    async def close(self) -> None:
        with contextlib.suppress(BrowserError):
            await self._browser.send("Target.closeTarget", {"targetId": self.target_id}, timeout=5)

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Runtime.consoleAPICalled":
            self.console.append(ConsoleMessage(str(params.get("type", "log")), _console_text(params.get("args", []))))
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(_remote_object_text(params.get("exceptionDetails", {})))
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append(ConsoleMessage(str(entry.get("level", "info")), str(entry.get("text", ""))))
        elif method == "Page.loadEventFired":
            for waiter in self._load_waiters:
                if not waiter.done():
                    waiter.set_result(None)


class Browser:
    """A running Chromium and one DevTools connection to it; made by ``launch``."""

    def __init__(
        self,
        process: asyncio.subprocess.Process,
        ws: ClientConnection,
        stderr_tail: deque[str],
        profile: Path,
        window_size: tuple[int, int],
    ) -> None:
        self.process = process
        self.window_size = window_size
        self.profile = profile  # the fresh profile directory, removed when ``launch``'s block ends
        self._ws = ws
        self._stderr_tail = stderr_tail
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._pages: dict[str, Page] = {}
        self._reader = asyncio.create_task(self._read())

    @property
    def stderr_tail(self) -> list[str]:
        """Chromium's last lines on stderr (for failure messages)."""
        return list(self._stderr_tail)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, *, session_id: str | None = None, timeout: float = 20.0
    ) -> dict[str, Any]:
        """A raw DevTools command (in a page's session when ``session_id`` is given); its result."""
        if self._reader.done():
            raise BrowserError(f"the DevTools connection is closed ({method})")
        message_id = next(self._ids)
        message: dict[str, Any] = {"id": message_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        reply: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message_id] = reply
        try:
            await self._ws.send(json.dumps(message))
            async with asyncio.timeout(timeout):
                return await reply
        except TimeoutError:
            raise BrowserError(f"{method} got no answer within {timeout:g} s") from None
        finally:
            self._pending.pop(message_id, None)

    async def new_page(self, url: str | None = None) -> Page:
        """A new tab with console, exceptions and load events watched; navigated to ``url`` when given."""
        created = await self.send("Target.createTarget", {"url": "about:blank"})
        target_id = created["targetId"]
        attached = await self.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        page = Page(self, target_id, attached["sessionId"])
        self._pages[page.session_id] = page
        for domain in ("Page.enable", "Runtime.enable", "Log.enable"):
            await page.send(domain)
        # headless windows keep room for browser UI they do not draw: the viewport is made the window's size
        width, height = self.window_size
        await page.send(
            "Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        )
        if url is not None:
            await page.goto(url)
        return page

    async def _read(self) -> None:
        try:
            async for frame in self._ws:
                message = json.loads(frame)
                if "id" in message:
                    reply = self._pending.get(message["id"])
                    if reply is None or reply.done():
                        continue
                    if "error" in message:
                        error = message["error"]
                        reply.set_exception(BrowserError(f"DevTools error {error.get('code')}: {error.get('message')}"))
                    else:
                        reply.set_result(message.get("result", {}))
                elif (page := self._pages.get(message.get("sessionId", ""))) is not None:
                    page._on_event(message.get("method", ""), message.get("params", {}))
        except Exception:  # the connection went away: every waiting command learns it below
            pass
        finally:
            for reply in self._pending.values():
                if not reply.done():
                    reply.set_exception(BrowserError("the DevTools connection closed"))

    async def close(self) -> None:
        """Ask Chromium to quit, then kill it if it lingers."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._ws.send(json.dumps({"id": next(self._ids), "method": "Browser.close"})), 2)
        with contextlib.suppress(Exception):
            await self._ws.close()
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        if self.process.returncode is None:
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()


async def _drain(stream: asyncio.StreamReader, tail: deque[str], listening: asyncio.Future[str]) -> None:
    """Keep reading Chromium's stderr (so it never blocks on a full pipe), noting the DevTools address."""
    while line := await stream.readline():
        tail.append(line.decode(errors="replace").rstrip())
        if not listening.done() and (match := _LISTENING.search(line)):
            listening.set_result(match.group(1).decode())
    if not listening.done():
        listening.set_exception(BrowserError("Chromium exited before DevTools listened"))


@contextlib.asynccontextmanager
async def launch(
    *,
    fake_audio: Path | None = None,
    loop_audio: bool = True,
    window_size: tuple[int, int] = (1280, 800),
    extra_flags: Sequence[str] = (),
    executable: str | None = None,
    timeout: float = 30.0,
) -> AsyncIterator[Browser]:
    """A headless Chromium for the block's length; killed and its profile removed after, whatever happens.

    ``fake_audio``: a WAV the browser uses as its microphone (granted without a prompt), looped unless
    ``loop_audio`` is false. ``extra_flags`` go after the base flags.
    """
    chromium = executable or require_chromium()
    profile = Path(tempfile.mkdtemp(prefix="voxline-chromium-"))
    process: asyncio.subprocess.Process | None = None
    drain: asyncio.Task[None] | None = None
    browser: Browser | None = None
    tail: deque[str] = deque(maxlen=_STDERR_KEPT)
    try:
        command = chromium_command(
            chromium, profile, fake_audio=fake_audio, loop_audio=loop_audio, window_size=window_size, extra_flags=extra_flags
        )
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        assert process.stderr is not None
        listening: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        drain = asyncio.create_task(_drain(process.stderr, tail, listening))
        try:
            async with asyncio.timeout(timeout):
                address = await listening
        except TimeoutError:
            raise BrowserError(f"Chromium did not open DevTools within {timeout:g} s: {list(tail)[-5:]}") from None
        except BrowserError as error:
            raise BrowserError(f"{error}: {list(tail)[-5:]}") from None
        ws = await connect(address, max_size=None, open_timeout=timeout, ping_interval=None)
        browser = Browser(process, ws, tail, profile, window_size)
        yield browser
    finally:
        if browser is not None:
            await browser.close()
        if process is not None and process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        if drain is not None:
            drain.cancel()
            with contextlib.suppress(BaseException):
                await drain
        shutil.rmtree(profile, ignore_errors=True)


T = TypeVar("T")


class _LoopThread:
    """An event loop on a thread of its own, for running the async driver from synchronous code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="chromium-driver", daemon=True)
        self._thread.start()

    def run(self, factory: Callable[[], Awaitable[T]]) -> T:
        async def call() -> T:
            return await factory()

        future: Future[T] = asyncio.run_coroutine_threadsafe(call(), self.loop)
        return future.result()

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(10)
        self.loop.close()


class SyncPage:
    """``Page`` for synchronous code: the same methods, blocking."""

    def __init__(self, page: Page, loop: _LoopThread) -> None:
        self.page = page
        self._loop = loop

    @property
    def console(self) -> list[ConsoleMessage]:
        return list(self.page.console)

    @property
    def exceptions(self) -> list[str]:
        return list(self.page.exceptions)

    def goto(self, url: str, timeout: float = 20.0) -> None:
        self._loop.run(lambda: self.page.goto(url, timeout))

    def evaluate(self, expression: str, timeout: float = 20.0) -> Any:
        return self._loop.run(lambda: self.page.evaluate(expression, timeout))

    def wait_for(self, condition: str, timeout: float = 10.0, interval: float = 0.05) -> Any:
        return self._loop.run(lambda: self.page.wait_for(condition, timeout, interval))

    def screenshot(self, path: Path | None = None, full_page: bool = False) -> bytes:
        return self._loop.run(lambda: self.page.screenshot(path, full_page))


class SyncBrowser:
    """``launch`` for synchronous code: ``with SyncBrowser(window_size=(1400, 2000)) as b: b.new_page(url)``."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._loop: _LoopThread | None = None
        self._context: contextlib.AbstractAsyncContextManager[Browser] | None = None
        self.browser: Browser | None = None

    def __enter__(self) -> SyncBrowser:
        require_chromium()  # skip (or fail in CI) here, in the test's thread, not on the loop's
        self._loop = _LoopThread()
        context = launch(**self._options)
        self._context = context
        try:
            self.browser = self._loop.run(context.__aenter__)
        except BaseException:
            self._loop.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._context is not None
        context = self._context
        try:
            self._loop.run(lambda: context.__aexit__(None, None, None))
        finally:
            self._loop.stop()

    def new_page(self, url: str | None = None) -> SyncPage:
        assert self._loop is not None and self.browser is not None
        browser = self.browser
        return SyncPage(self._loop.run(lambda: browser.new_page(url)), self._loop)

