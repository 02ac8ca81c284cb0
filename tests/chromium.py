"""Headless Chromium driven over the DevTools protocol on a pipe: no port, no extra package.

Chromium started with --remote-debugging-pipe reads protocol commands from its file
descriptor 3 and writes replies and events to 4, each a JSON message ended by a NUL
byte (chrome://inspect's transport, without the WebSocket). This module starts it
as the machine's network is closed and the test runs as root: no sandbox, no GPU,
nothing that calls home, and a fresh profile.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class ChromiumError(RuntimeError):
    """The browser answered a command with an error, or not in time."""


def executable() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Chromium:
    """One headless browser with one page; commands go to that page."""

    def __init__(self, profile: Path, log: Path, timeout: float = 60.0):
        self.timeout = timeout
        commands_read, self._commands = os.pipe()
        self._replies, replies_write = os.pipe()
        profile.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as output:
            self.pid = os.posix_spawn(
                executable(),
                [executable(), *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                os.environ,
                file_actions=[
                    (os.POSIX_SPAWN_DUP2, commands_read, 3),
                    (os.POSIX_SPAWN_DUP2, replies_write, 4),
                    (os.POSIX_SPAWN_DUP2, output.fileno(), 1),
                    (os.POSIX_SPAWN_DUP2, output.fileno(), 2),
                ],
            )
        os.close(commands_read)
        os.close(replies_write)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self._session = None
        target = self.send("Target.createTarget", url="about:blank")["targetId"]
        self._session = self.send("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.send("Page.enable")

    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._replies], [], [], left)[0]:
                raise ChromiumError("no answer from the browser in time")
            chunk = os.read(self._replies, 1 << 20)
            if not chunk:
                raise ChromiumError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send a command (to the page, once attached) and wait for its reply."""
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if self._session:
            message["sessionId"] = self._session
        os.write(self._commands, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise ChromiumError(f"{method}: {reply['error']}")
                return reply["result"]
            self._events.append(reply)

    def wait_for(self, event: str) -> None:
        """Wait until the page sends `event` (one seen since the last wait counts)."""
        deadline = time.monotonic() + self.timeout
        while True:
            found = next((seen for seen in self._events if seen.get("method") == event), None)
            if found:
                self._events.clear()
                return
            self._events.append(self._message(deadline))

    def open(self, url: str, width: int, height: int) -> None:
        """Load `url` in a window `width` x `height` CSS pixels wide, and wait for its load."""
        self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        self._events.clear()
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def reload(self) -> None:
        """Load the page anew, and wait for its load."""
        self._events.clear()
        self.send("Page.reload")
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str, frame: str | None = None) -> Any:
        """The JSON value of a JavaScript expression (promises awaited) in the page, or in
        one of its frames (`frame`, an id from `child_frames`; an iframe of another origin
        too, through a world of the test's own in that frame)."""
        where = {}
        if frame is not None:
            world = self.send("Page.createIsolatedWorld", frameId=frame)
            where["contextId"] = world["executionContextId"]
        result = self.send(
            "Runtime.evaluate",
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
            **where,
        )
        if "exceptionDetails" in result:
            raise ChromiumError(f"{expression[:80]}...: {result['exceptionDetails']}")
        return result["result"].get("value")

    def child_frames(self) -> list[str]:
        """Ids of the page's frames (its iframes), each once it has loaded."""
        tree = self.send("Page.getFrameTree")["frameTree"]
        frames = [child["frame"]["id"] for child in tree.get("childFrames", [])]
        deadline = time.monotonic() + self.timeout
        for frame in frames:
            while self.evaluate("document.readyState", frame) != "complete":
                if time.monotonic() > deadline:
                    raise ChromiumError(f"frame {frame} did not load in time")
                time.sleep(0.05)
        return frames

    def screenshot(self, path: Path) -> Path:
        """The whole page, as far down as it goes, as a PNG."""
        width, height = self.evaluate(
            "[document.documentElement.clientWidth, document.documentElement.scrollHeight]"
        )
        shot = self.send(
            "Page.captureScreenshot",
            format="png",
            captureBeyondViewport=True,
            clip={"x": 0, "y": 0, "width": width, "height": height, "scale": 1},
        )
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def close(self) -> None:
        try:
            self._session = None
            self.send("Browser.close")
        except ChromiumError:
            os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)
        os.close(self._commands)
        os.close(self._replies)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
