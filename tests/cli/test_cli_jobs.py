"""The queue commands, as a user types them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

from app.cli import main
from app.engine import paths
from app.engine.settings import Settings, save_settings
from app.engine.store.opening import OpenFor, open_queue


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_prints_the_new_id_last_and_show_prints_the_timeline(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run_cli(capsys, "submit", "a red circle", "--steps", "7", "--seed", "5",
                           "--size", "64x96", "--scheduler", "Euler a", "--cfg", "3.5")  # fmt: skip
    assert code == 0
    job_id = out.strip().splitlines()[-1]
    assert job_id == "1"
    assert run_cli(capsys, "pause", job_id)[0] == 0
    code, out, _ = run_cli(capsys, "show", job_id)
    assert code == 0
    assert "PAUSED" in out.splitlines()[0]
    assert "easel-tiny, Euler a, 7 steps, CFG 3.5" in out
    assert "64x96, seed 5" in out
    timeline = out.split("timeline:")[1].strip().splitlines()
    assert "(new) -> PENDING" in timeline[0] and "SUBMIT" in timeline[0] and "cli" in timeline[0]
    assert "PENDING -> PAUSED" in timeline[1] and "PAUSE" in timeline[1] and "cli" in timeline[1]


def test_jobs_filters_by_status(capsys: pytest.CaptureFixture[str]) -> None:
    for prompt in ("one", "two", "three"):
        run_cli(capsys, "submit", prompt)
    run_cli(capsys, "cancel", "2")
    _, out, _ = run_cli(capsys, "jobs", "--status", "cancelled")
    assert [line.split()[0] for line in out.splitlines()] == ["2"]
    _, out, _ = run_cli(capsys, "jobs")
    assert [line.split()[0] for line in out.splitlines()] == ["3", "2", "1"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["submit", ""], "error: the prompt is empty"),
        (["submit", "cat", "--size", "big"], "size 'big' is not WIDTHxHEIGHT"),
        (["submit", "cat", "--size", "100x64"], "width 100 is not a multiple of 8"),
        (["submit", "cat", "--steps", "999"], "steps must be between 1 and 150, not 999"),
        (["submit", "cat", "--scheduler", "LMS"], "unknown scheduler 'LMS'"),
        (["submit", "cat", "--cache", "ludicrous"], "unknown speed 'ludicrous'"),
        (["submit", "cat", "--cache-threshold", "0.1"], "needs speed fast or fastest"),
        (
            ["submit", "cat", "--cache", "fast"],
            "works on Flux.1, LTX-Video, Wan 2.1, Wan 2.1 I2V, LTX-Video 0.9.5+, Wan 2.2 I2V, "
            "Wan 2.2 TI2V, Qwen-Image, Qwen-Image-Edit and Qwen-Image-Edit Plus models, not on "
            "SD 1.x",
        ),
        (["show", "42"], "error: There is no job 42"),
    ],
)
def test_bad_input_is_a_clear_error_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _out, err = run_cli(capsys, *argv)
    assert code != 0
    assert message in err
    assert "Traceback" not in err
    assert run_cli(capsys, "jobs")[1] == ""


def test_a_refused_transition_exits_non_zero_and_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_cli(capsys, "submit", "a cat")
    code, _, err = run_cli(capsys, "resume", "1")
    assert code == 2
    assert err.strip() == "error: Can't RESUME job 1 in PENDING"
    code, _, _ = run_cli(capsys, "cancel", "1")
    code_again, out, _ = run_cli(capsys, "cancel", "1")  # already satisfied: harmless
    assert (code, code_again) == (0, 0) and "CANCELLED" in out
    _, out, _ = run_cli(capsys, "show", "1")
    assert out.count("CANCEL ") == 1


def test_unknown_status_filter_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["jobs", "--status", "DONE"])
    assert exit_info.value.code == 2
    assert "unknown status 'DONE'" in capsys.readouterr().err


def test_the_real_command_line_with_home(tmp_path: Path) -> None:
    home = tmp_path / "elsewhere"
    env = {k: v for k, v in os.environ.items() if k != "EASEL_HOME"}
    cmd = [sys.executable, "-m", "app", "--home", str(home)]
    submitted = subprocess.run([*cmd, "submit", "a green square"], capture_output=True,
                               text=True, env=env, check=True)  # fmt: skip
    assert submitted.stdout.strip().splitlines()[-1] == "1"
    assert (home / "easel.db").exists()
    refused = subprocess.run([*cmd, "retry", "1"], capture_output=True, text=True, env=env)
    assert refused.returncode != 0
    assert "Can't RETRY job 1 in PENDING" in refused.stderr


def test_submit_gives_jobs_the_attempts_the_settings_ask_for(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    # settings.json said 20; `submit` stored the queue's default of 3 (issue 21 item 10).
    paths.data_dir().mkdir(parents=True, exist_ok=True)
    save_settings(Settings(max_attempts=20))
    Image.new("RGB", (64, 64), (10, 200, 30)).save(tmp_path / "in.png")
    first = int(run_cli(capsys, "submit", "a cat")[1])
    img2img = int(run_cli(capsys, "submit", "a dog", "--init-image", str(tmp_path / "in.png"))[1])
    after = int(run_cli(capsys, "submit", "a bird", "--after", str(first))[1])
    upscale = int(run_cli(capsys, "upscale", str(first))[1])  # a follow-up takes its parent's
    queue = open_queue(purpose=OpenFor.READING)
    try:
        attempts = [queue.get(job_id).max_attempts for job_id in (first, img2img, after, upscale)]
    finally:
        queue.db.dispose()
    assert attempts == [20, 20, 20, 20]
    code, out, _ = run_cli(capsys, "show", str(first))
    assert code == 0 and "attempt     1 of 20" in out


def test_a_compiled_job_is_stored_and_shown_as_such(capsys: pytest.CaptureFixture[str]) -> None:
    run_cli(capsys, "submit", "a cat", "--compile")
    run_cli(capsys, "submit", "a dog")
    assert "compile" in run_cli(capsys, "show", "1")[1]
    assert "compile" not in run_cli(capsys, "show", "2")[1]
