"""The command line names models as its user likes on this machine's own queue (a path is
theirs to give), and by name only on a shared queue, whose workers refuse paths."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.engine import paths
from tests import pg

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
