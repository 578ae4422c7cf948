"""The real server, started as a user starts it (`python -m app serve`) on a free loopback
port, in a process of its own; and small helpers to talk to it."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Served:
    url: str
    home: Path
    process: subprocess.Popen[str]

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=30, **kwargs)  # type: ignore[arg-type]


def serve_command(home: Path, port: int, *args: str) -> tuple[list[str], dict[str, str]]:
    env = {**os.environ, "EASEL_HOME": str(home), "PYTHONPATH": str(REPO)}
    env.pop("EASEL_DB", None)
    return [sys.executable, "-m", "app", "serve", "--port", str(port), *args], env


def shown_callback_secret(home: Path) -> str:
    """The queue's callback secret, as a user gets it: `serve --show-callback-secret`."""
    command, env = serve_command(home, 7860, "--show-callback-secret")
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=60, check=True)  # fmt: skip
    return done.stdout.strip()


@contextmanager
def serving(home: Path, *args: str, host: str = "127.0.0.1") -> Iterator[Served]:
    """`python -m app serve` until the block ends (then SIGTERM, as a user stops it)."""
    port = free_port()
    command, env = serve_command(home, port, *args)
    process = subprocess.Popen(
        command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )  # fmt: skip
    served = Served(f"http://{host}:{port}", home, process)
    try:
        _wait_listening("127.0.0.1" if host == "0.0.0.0" else host, port, process)
        yield served
    finally:
        stop(process)


def _wait_listening(host: str, port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            raise AssertionError(f"the server exited with {process.returncode}: {output}")
        try:
            with socket.create_connection((host, port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the server did not start listening")


def stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for(
    client: httpx.Client, job_id: int, statuses: Sequence[str], timeout_s: float = 60
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job: dict[str, Any] = client.get(f"/api/v1/jobs/{job_id}").json()
        if job["status"] in statuses:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"job {job_id} stayed {job['status']}")
        time.sleep(0.05)
