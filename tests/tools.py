"""What the slow DAG test uses to look at the results as users do: a real browser (Debian's chromium driven by
Playwright, offline) and an MLflow tracking server on a free loopback port."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"  # `make browser`
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def browser_missing() -> str | None:
    """Why the browser checks cannot run here, or None."""
    if not Path(CHROMIUM).is_file():
        return f"{CHROMIUM} missing (make browser)"
    try:
        import playwright  # noqa: F401
    except ImportError:
        return "playwright missing (the dev extras of pyproject.toml)"
    return None


@contextlib.contextmanager
def offline_page(viewport: tuple[int, int] = (1600, 1000)) -> Iterator:
    """A headless Chromium page that may load nothing but file:// and 127.0.0.1 URLs; every other request is
    aborted and recorded in `page.blocked`."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": viewport[0], "height": viewport[1]})
            page.blocked = []

            def route(request_route, request):
                if request.url.startswith(("file://", "http://127.0.0.1", "data:", "blob:")):
                    request_route.continue_()
                else:
                    page.blocked.append(request.url)
                    request_route.abort()

            page.route("**/*", route)
            yield page
        finally:
            browser.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def _serving(command: list[str], url: str, log: Path, cwd: Path | None = None, timeout: float = 180,
             env: dict[str, str] | None = None) -> Iterator[None]:
    """Runs `command` (a server that answers `url`/health) until the block ends; stopped by its process group."""
    with open(log, "w") as out:
        server = subprocess.Popen(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  start_new_session=True)  # its own process group: its workers stop with it
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not start: {log.read_text()[-2000:]}")
            time.sleep(1)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


@contextlib.contextmanager
def mlflow_server(backend: str, log: Path, timeout: float = 180) -> Iterator[str]:
    """`mlflow server` on 127.0.0.1 at a free port, one worker; yields its URL."""
    port = free_port()
    mlflow = Path(sys.executable).parent / "mlflow"
    url = f"http://127.0.0.1:{port}"
    with _serving([str(mlflow), "server", "--backend-store-uri", backend, "--host", "127.0.0.1", "--port", str(port),
                   "--workers", "1"], url, log, timeout=timeout):
        yield url


@contextlib.contextmanager
def put_ui(repo: Path, log: Path, timeout: float = 180) -> Iterator[tuple[str, str]]:
    """`put ui` (what `make mlflow` runs) in `repo` at a free loopback port; yields the server's URL and the link
    the command printed for the user to open."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}  # the repository's mlflow.db
    with _serving([sys.executable, "-m", "put", "ui", "--port", str(port)], url, log, cwd=repo, timeout=timeout,
                  env=env):
        printed = [line for line in log.read_text().splitlines() if line.startswith("open http")]
        assert printed, log.read_text()[-2000:]
        yield url, printed[0].split(maxsplit=1)[1]
