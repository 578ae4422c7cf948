"""The command line names models as its user likes on this machine's own queue (a path is
theirs to give), and by name only on a shared queue, whose workers refuse paths."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine import paths
from app.engine.store.opening import OpenFor, open_queue
from tests import pg

from .test_cli_faults import app_command
from .test_cli_jobs import run_cli


@pytest.fixture
def model_outside(tmp_path: Path) -> Path:
    """A usable pipeline folder outside every model folder."""
    folder = tmp_path / "elsewhere" / "tiny"
    shutil.copytree(paths.bundled_models_dir() / "easel-tiny", folder)
    return folder


def test_a_model_path_is_the_local_users_to_give_on_this_machines_queue(
    capsys: pytest.CaptureFixture[str], model_outside: Path
) -> None:
    code, out, err = run_cli(capsys, "submit", "a cat", "--model", str(model_outside))
    assert code == 0, err
    assert out.strip().splitlines()[-1] == "1"


def test_a_shared_queue_takes_model_names_only(
    capsys: pytest.CaptureFixture[str], model_outside: Path
) -> None:
    with pg.fresh_schema() as url:
        for model in (str(model_outside), "/etc/passwd", "../elsewhere/tiny"):
            code, _, err = run_cli(capsys, "--db", url, "submit", "a cat", "--model", model)
            assert code == 2
            assert err == (
                f"error: model {model!r} is not one of the installed models; GET /api/v1/models "
                "lists them\n"
            )
        code, _, err = run_cli(capsys, "--db", url, "submit", "a cat", "--model", "easel-tiny")
        assert code == 0, err


@pytest.mark.slow
def test_generate_out_on_a_shared_queue_copies_the_image_here(tmp_path: Path) -> None:
    """A shared queue's rows carry no folder of this machine's (its workers write only into
    their outputs folder): `generate --out DIR` copies the finished image into DIR."""
    out = tmp_path / "out"
    with pg.fresh_schema() as url:
        result = app_command(tmp_path / "home", "--db", url, "generate", "a cat",
                             "--steps", "2", "--seed", "4", "--out", str(out))  # fmt: skip
        assert result.returncode == 0, result.stderr
        queue = open_queue(url, OpenFor.READING)
        try:
            [job] = queue.jobs()
            assert job.status == "SUCCESS" and job.output_dir is None
        finally:
            queue.db.dispose()
    printed = Path(result.stdout.strip().splitlines()[-1])
    assert printed.parent == out and printed.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
