"""img2img, --after, upscale, vary and lineage, as a user types them."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from PIL import Image

from app.cli import build_parser, main
from app.engine.jobs.graph import init_image_of
from app.engine.jobs.init_image import prepare_init_image, read_init_image
from app.engine.store.opening import OpenFor, open_queue

from .test_cli_faults import app_command
from .test_cli_jobs import run_cli


def write_image(path: Path, size: tuple[int, int], mode: str = "RGB") -> Path:
    colour = (10, 200, 30, 0) if mode == "RGBA" else (10, 200, 30)
    Image.new(mode, size, colour).save(path)
    return path


def test_submit_with_an_init_image_stores_the_image_with_the_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    image = write_image(tmp_path / "in.png", (96, 64))
    code, out, _ = run_cli(capsys, "submit", "a cat", "--init-image", str(image),
                           "--strength", "0.6", "--seed", "4")  # fmt: skip
    assert code == 0
    image.unlink()  # the job does not depend on the file any more
    queue = open_queue()
    job = queue.get(int(out.strip()))
    assert (job.width, job.height, job.strength) == (96, 64, 0.6)
    assert job.init_image.startswith("upload:")
    png = init_image_of(queue, job)
    assert png is not None and png.startswith(b"\x89PNG")
    queue.db.dispose()


def test_an_init_image_with_alpha_and_an_odd_size_is_converted_with_a_note(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    image = write_image(tmp_path / "odd.png", (101, 70), mode="RGBA")
    code, out, err = run_cli(capsys, "submit", "a cat", "--init-image", str(image))
    assert code == 0
    assert "transparent parts were filled with white" in err
    assert "resized from 101x70 to 96x64" in err
    queue = open_queue()
    job = queue.get(int(out.strip()))
    assert (job.width, job.height, job.strength) == (96, 64, 0.75)
    queue.db.dispose()


@pytest.mark.parametrize(
    ("make", "argv", "message"),
    [
        (lambda p: p.write_bytes(b"hello"), [], "is not an image that can be read"),
        (lambda p: write_image(p, (16, 16)), [], "each side must be at least 32 pixels"),
        (lambda p: write_image(p, (64, 64)), ["--strength", "1.5"], "strength must be above 0"),
        (None, [], "cannot read the init image"),
        (lambda p: write_image(p, (9000, 8000)), [], "too large to load"),
    ],
)
def test_bad_init_images_are_refused_in_one_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, make: object, argv: list[str], message: str
) -> None:
    path = tmp_path / "in.png"
    if callable(make):
        make(path)
    code, out, err = run_cli(capsys, "submit", "a cat", "--init-image", str(path), *argv)
    assert (code, out) == (2, "")
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_submit_after_upscale_vary_and_lineage(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    assert run_cli(capsys, "submit", "a dog", "--after", "1")[1].strip() == "2"
    assert run_cli(capsys, "upscale", "1", "--strength", "0.4")[1].strip() == "3"
    assert run_cli(capsys, "vary", "1", "--count", "2")[1].split() == ["4", "5"]
    _, out, _ = run_cli(capsys, "jobs", "--status", "blocked")
    assert [line.split()[0] for line in out.splitlines()] == ["5", "4", "3", "2"]
    _, out, _ = run_cli(capsys, "lineage", "3")
    assert "parents:  #1" in out and "blocked:  waiting for #1 (pending)" in out
    _, out, _ = run_cli(capsys, "lineage", "1")
    assert "children: #2, #3, #4, #5" in out
    queue = open_queue()
    upscale = queue.get(3)
    assert (upscale.width, upscale.height, upscale.seed, upscale.init_image) == (
        128, 128, 3, "job:1",
    )  # fmt: skip
    queue.db.dispose()
    assert run_cli(capsys, "cancel", "1")[0] == 0
    _, out, _ = run_cli(capsys, "jobs", "--status", "cancelled")
    assert len(out.splitlines()) == 5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["submit", "cat", "--after", "9"], "error: there is no job 9 to wait for"),
        (["upscale", "9"], "error: There is no job 9"),
        (["submit", "cat", "--strength", "0.5"], "--strength needs --init-image"),
    ],
)
def test_refused_dependencies(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = run_cli(capsys, *argv)
    assert (code, out) == (2, "")
    assert message in err


def test_an_upscale_too_big_for_the_model_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    main(["submit", "a cat", "--size", "64x64"])
    code, _, err = run_cli(capsys, "upscale", "1", "--scale", "64")
    assert code == 2 and "width must be between 32 and 2048, not 4096" in err


def img2img_options(command: str) -> dict[str, str | None]:
    """The img2img options a command's parser has: flag -> help text."""
    commands = next(
        action for action in build_parser()._actions
        if isinstance(action, argparse._SubParsersAction)
    )  # fmt: skip
    groups = commands.choices[command]._action_groups
    [group] = [group for group in groups if group.title == "img2img"]
    return {action.option_strings[0]: action.help for action in group._group_actions}


def test_generate_has_the_img2img_options_of_submit() -> None:
    assert img2img_options("generate") == img2img_options("submit")
    assert set(img2img_options("generate")) == {"--init-image", "--strength"}


@pytest.mark.slow
def test_generate_from_an_init_image_on_the_bundled_model(tmp_path: Path) -> None:
    # `generate` had no --init-image or --strength (issue 21 item 15): argparse refused them.
    image = write_image(tmp_path / "in.png", (96, 64))
    result = app_command(
        tmp_path / "home", "generate", "a cat", "--init-image", str(image), "--strength", "0.5",
        "--steps", "2", "--seed", "4", "--out", str(tmp_path / "out"),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    output = Path(result.stdout.strip().splitlines()[-1])
    assert output.parent == tmp_path / "out"
    with Image.open(output) as made:
        assert made.size == (96, 64)  # the init image's size, as with `submit`
    queue = open_queue(tmp_path / "home" / "easel.db", OpenFor.READING)
    try:
        [job] = queue.jobs()
        assert (job.status, job.strength, job.width, job.height) == ("SUCCESS", 0.5, 96, 64)
        assert init_image_of(queue, job) == image_png(image)
    finally:
        queue.db.dispose()


def image_png(path: Path) -> bytes:
    """What a job stores of an init image: the file as Easel prepares it (RGB, a PNG)."""
    return prepare_init_image(read_init_image(path)).png


def test_generate_refuses_a_strength_without_an_init_image(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "generate", "a cat", "--strength", "0.5")
    assert (code, out, err) == (2, "", "error: --strength needs --init-image\n")
