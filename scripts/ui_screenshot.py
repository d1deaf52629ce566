"""One screenshot of a page of the MLflow UI with headless Chromium, driven over the DevTools
protocol on a pipe (standard library only; used by ui_screenshots.sh).

Before the page's own scripts run, its localStorage says what a person has done on a first
visit of MLflow 3.17's UI: the assistant opened once (on a loopback address its chat panel
opens over a third of the window on the first visit), the model registry's promotion dialog
was closed, and the machine-learning view ("Model training") was chosen, which the registry
page would otherwise not show in its sidebar (it does not read `?workflowType=` there).

    python3 ui_screenshot.py CHROMIUM URL FILE WIDTH HEIGHT [WAIT_S [CLICK_SELECTOR]]

CLICK_SELECTOR: a CSS selector whose matches are clicked, last first, once the page has
rendered (the runs table's expand buttons, to show the trials under their sweep).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

SEEN = (
    "localStorage.setItem('mlflow.assistant.fab.autoOpenedOnFirstLoad_v1', 'true');"
    "localStorage.setItem('_mlflow_model_registry_promo_modal_dismissed_v1', 'true');"
    "localStorage.setItem('mlflow.workflowType_v1', JSON.stringify('machine_learning'));"
)


class Pipe:
    """The DevTools protocol on Chromium's --remote-debugging-pipe (fd 3 in, fd 4 out)."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.write_fd, self.read_fd = write_fd, read_fd
        self.buffer = b""
        self.next_id = 0

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read()
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return dict(answer.get("result", {}))

    def _read(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium closed the DevTools pipe")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return dict(json.loads(message))


def screenshot(
    chromium: str, url: str, file: str, size: tuple[int, int], wait_s: float, click: str = ""
) -> None:
    width, height = size
    to_chromium, from_us = os.pipe()
    to_us, from_chromium = os.pipe()

    def fds() -> None:  # Chromium reads commands on fd 3 and writes answers on fd 4
        read_end, write_end = os.dup(to_chromium), os.dup(from_chromium)  # above 3 and 4
        os.dup2(read_end, 3)
        os.dup2(write_end, 4)

    with tempfile.TemporaryDirectory() as profile:
        browser = subprocess.Popen(
            [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--no-first-run", f"--user-data-dir={profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=fds, close_fds=False,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        os.close(to_chromium)
        os.close(from_chromium)
        pipe = Pipe(from_us, to_us)
        try:
            target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
            session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            pipe.call("Page.enable", session)
            pipe.call("Page.addScriptToEvaluateOnNewDocument", session, source=SEEN)
            pipe.call(
                "Emulation.setDeviceMetricsOverride", session,
                width=width, height=height, deviceScaleFactor=1, mobile=False,
            )  # fmt: skip
            pipe.call("Page.navigate", session, url=url)
            time.sleep(wait_s)  # the React app fetches and renders; no event says it is done
            if click:
                found = f"Array.from(document.querySelectorAll({json.dumps(click)})).reverse()"
                clicks = f"{found}.forEach(b => b.click())"
                pipe.call("Runtime.evaluate", session, expression=clicks)
                time.sleep(min(wait_s, 3.0))
            png = pipe.call("Page.captureScreenshot", session, format="png")["data"]
            with open(file, "wb") as out:
                out.write(base64.b64decode(png))
            pipe.call("Browser.close")
        finally:
            try:
                browser.wait(timeout=20)
            except subprocess.TimeoutExpired:
                browser.kill()
                browser.wait(timeout=10)


if __name__ == "__main__":
    chromium, url, file, width, height = sys.argv[1:6]
    wait = float(sys.argv[6]) if len(sys.argv) > 6 else 8.0
    click = sys.argv[7] if len(sys.argv) > 7 else ""
    screenshot(chromium, url, file, (int(width), int(height)), wait, click)
