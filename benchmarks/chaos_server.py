"""A PostgreSQL server of the chaos benchmark's own, which its `db-outage` fault may stop.

`scripts/pg_test_server.sh` runs it in a cluster folder and on a port of its own
(EASEL_PG_DIR, EASEL_PG_PORT), never the test suite's server (port 54329), which other
processes on this machine rely on. `PrivateServer.environment` is set in the benchmark's
environment too, so that every later call of the script (the `--server-restarts` of a
`--db` run) reaches this server and no other.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PG_SERVER = REPO / "scripts" / "pg_test_server.sh"
SUITE_PORT = 54329  # the test suite's server: never this one
PRIVATE_PORT = 54339
DIR_ENV, PORT_ENV = "EASEL_PG_DIR", "EASEL_PG_PORT"


class NoServer(Exception):
    """PostgreSQL is not installed here, or the private server did not start."""


@dataclass
class PrivateServer:
    port: int = PRIVATE_PORT
    folder: Path = field(init=False)

    def __post_init__(self) -> None:
        if self.port == SUITE_PORT:
            raise ValueError(f"port {SUITE_PORT} is the test suite's server: choose another")
        self.folder = Path(tempfile.mkdtemp(prefix="easel-chaos-pg-"))

    @property
    def environment(self) -> dict[str, str]:
        return {DIR_ENV: str(self.folder), PORT_ENV: str(self.port)}

    def start(self) -> str:
        """Start it (a new cluster the first time); its URL."""
        url = self._script("start").strip()
        if not url:
            raise NoServer("PostgreSQL is not installed here: the server faults need it")
        return url

    def stop(self) -> None:
        self._script("stop")

    def remove(self) -> None:
        """Stop it and delete its cluster."""
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _script(self, command: str) -> str:
        environment = os.environ | self.environment
        done = subprocess.run(
            [str(PG_SERVER), command], env=environment, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise NoServer(f"pg_test_server.sh {command} failed: {done.stderr.strip()}")
        return done.stdout
