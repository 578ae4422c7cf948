"""Inpaint and outpaint from the command line: masks stored with their jobs, bad masks
refused in one sentence with nothing stored."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine import paths
from app.engine.jobs.graph import init_image_of, mask_of, parents_of
from app.engine.jobs.mask import open_mask
from app.engine.store.opening import open_queue

from .test_cli_graph import write_image
from .test_cli_jobs import run_cli


def write_mask(path: Path, size: tuple[int, int], box: tuple[int, int, int, int] | None) -> Path:
    mask = Image.new("L", size, 0)
    if box is not None:
        mask.paste(255, box)
    mask.save(path)
    return path


def test_submit_with_a_mask_stores_it_with_the_job(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    image = write_image(tmp_path / "in.png", (96, 64))
    mask = write_mask(tmp_path / "m.png", (96, 64), (8, 8, 40, 40))
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--init-image", str(image), "--mask", str(mask),
        "--mask-blur", "2", "--only-masked", "--padding", "16", "--size", "64x64",
    )  # fmt: skip
    assert (code, err) == (0, "")
    image.unlink()  # the job depends on neither file any more
    mask.unlink()
    queue = open_queue()
    job = queue.get(int(out.strip()))
    assert (job.mask_blur, job.only_masked, job.mask_padding) == (2, True, 16)
    assert (job.width, job.height) == (64, 64)  # generated at 64x64 ...
    init, stored = init_image_of(queue, job), mask_of(queue, job)
    assert init is not None and stored is not None
    with Image.open(io.BytesIO(init)) as opened:
        assert opened.size == (96, 64)  # ... pasted back into the whole 96x64 picture
    pixels = np.asarray(open_mask(stored))
    assert pixels[20, 20] == 255 and pixels[50, 80] == 0 and pixels.shape == (64, 96)
    queue.db.dispose()


def test_a_flux2_klein_inpaint_is_queued_and_its_img2img_refused_in_one_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Klein inpaints (diffusers' Klein inpaint pipeline) but has no img2img: the image
    without its mask is not checked on its own as an img2img before the mask is added."""
    from app.testing.tiny.klein import write_tiny_klein

    write_tiny_klein(paths.models_dir() / "klein")
    capsys.readouterr()  # its progress bar
    image = write_image(tmp_path / "in.png", (64, 48))
    mask = write_mask(tmp_path / "m.png", (64, 48), (8, 8, 40, 40))
    picture = ("--model", "klein", "--init-image", str(image))
    code, out, err = run_cli(capsys, "submit", "a cat", *picture, "--mask", str(mask))
    assert (code, err) == (0, "")
    assert open_queue().get(int(out.strip())).mask
    code, out, err = run_cli(capsys, "submit", "a cat", *picture)
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "Flux.2 Klein cannot run img2img in Easel (an init image without a mask)" in err


@pytest.mark.parametrize(
    ("mask_size", "box", "message"),
    [
        ((64, 96), (0, 0, 8, 8), "the mask is 64x96 but the image is 96x64"),
        ((96, 64), None, "the mask is empty (all black): it marks nothing to repaint"),
    ],
)
def test_bad_masks_are_refused_in_one_sentence_and_nothing_is_stored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path,
    mask_size: tuple[int, int], box: tuple[int, int, int, int] | None, message: str,
) -> None:  # fmt: skip
    image = write_image(tmp_path / "in.png", (96, 64))
    mask = write_mask(tmp_path / "m.png", mask_size, box)
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--init-image", str(image), "--mask", str(mask)
    )
    assert (code, out) == (2, "") and message in err and len(err.strip().splitlines()) == 1
    assert run_cli(capsys, "jobs")[1] == ""


def test_a_mask_that_is_not_an_image_or_has_no_image_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    image = write_image(tmp_path / "in.png", (64, 64))
    text = tmp_path / "mask.png"
    text.write_text("not a picture")
    code, _, err = run_cli(
        capsys, "submit", "a cat", "--init-image", str(image), "--mask", str(text)
    )
    assert code == 2 and "the mask is not an image that can be read" in err
    code, _, err = run_cli(capsys, "submit", "a cat", "--mask", str(text))
    assert (code, err) == (2, "error: --mask needs --init-image (the image to repaint)\n")
    code, _, err = run_cli(capsys, "submit", "a cat", "--only-masked")
    assert code == 2 and "need --mask" in err
    assert run_cli(capsys, "jobs")[1] == ""


def test_inpaint_of_a_job_is_its_child_and_outpaint_extends_a_finished_image(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    mask = write_mask(tmp_path / "m.png", (64, 64), (0, 0, 32, 32))
    code, out, err = run_cli(capsys, "inpaint", "1", "--mask", str(mask), "--prompt", "a hat")
    assert (code, err, out.strip()) == (0, "", "2")
    queue = open_queue()
    child = queue.get(2)
    assert (child.init_image, child.prompt, child.status) == ("job:1", "a hat", "BLOCKED")
    assert parents_of(queue, 2) == [1] and child.mask.startswith("upload:")
    # Outpaint needs the finished image: none yet.
    code, _, err = run_cli(capsys, "outpaint", "1", "--left", "32")
    assert code == 2 and "job 1 has no finished image to extend yet" in err
    done = tmp_path / "done.png"
    write_image(done, (64, 64))
    from sqlalchemy import update

    from app.models.tables import JOB

    with queue.db.write() as conn:  # as a worker's SUCCESS leaves it
        conn.execute(update(JOB).where(JOB.c.id == 1).values(output_path=str(done)))
    code, out, err = run_cli(capsys, "outpaint", "1", "--left", "32", "--bottom", "16")
    assert (code, err) == (0, "")
    extended = queue.get(int(out.strip()))
    assert (extended.width, extended.height, extended.strength) == (96, 80, 1.0)
    stored = mask_of(queue, extended)
    assert stored is not None
    pixels = np.asarray(open_mask(stored))
    assert pixels[:, :32].min() == 255 and pixels[64:].min() == 255
    assert pixels[:64, 32:].max() == 0  # the old picture is kept
    code, _, err = run_cli(capsys, "outpaint", "1", "--right", "4096")
    assert code == 2 and "the extended canvas would be" in err
    queue.db.dispose()


@pytest.mark.parametrize(
    "extra", [("--batch-count", "3"), ("--variation-strength", "0.5"), ("--combinatorial",)]
)
def test_a_mask_with_a_batch_or_variation_is_refused_in_one_sentence(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: tuple[str, ...]
) -> None:
    image = write_image(tmp_path / "in.png", (96, 64))
    mask = write_mask(tmp_path / "m.png", (96, 64), (8, 8, 40, 40))
    code, _, err = run_cli(
        capsys, "submit", "a cat", "--init-image", str(image), "--mask", str(mask), *extra
    )
    assert code == 2 and err.count("\n") == 1
    assert "--mask, --control and --reference make one job" in err
    assert run_cli(capsys, "jobs")[1] == ""


def test_a_flux1_fill_model_paints_a_jobs_image_and_text_to_image_on_it_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`inpaint N --model fill --cfg 30` and `outpaint N --model fill`: another model than
    the job's paints it (Flux.1 Fill is no text-to-image model: it cannot have drawn it)."""
    from app.testing.tiny.flux_fill import write_tiny_flux_fill

    write_tiny_flux_fill(paths.models_dir() / "fill")
    capsys.readouterr()  # its progress bar
    code, out, err = run_cli(capsys, "submit", "a cat", "--model", "fill")
    assert (code, out) == (2, "") and len(err.strip().splitlines()) == 1
    assert "Flux.1 Fill only inpaints and outpaints: it needs a picture and a mask" in err
    assert run_cli(capsys, "submit", "a cat", "--seed", "3")[1].strip() == "1"
    mask = write_mask(tmp_path / "m.png", (64, 64), (0, 0, 32, 32))
    fill = ("--model", "fill", "--cfg", "30")
    code, out, err = run_cli(capsys, "inpaint", "1", "--mask", str(mask), *fill)
    assert (code, err) == (0, "")
    queue = open_queue()
    child = queue.get(int(out.strip()))
    assert (child.model, child.cfg, child.init_image) == ("fill", 30.0, "job:1")
    done = tmp_path / "done.png"
    write_image(done, (64, 64))
    from sqlalchemy import update

    from app.models.tables import JOB

    with queue.db.write() as conn:  # as a worker's SUCCESS leaves it
        conn.execute(update(JOB).where(JOB.c.id == 1).values(output_path=str(done)))
    code, out, err = run_cli(capsys, "outpaint", "1", "--right", "16", "--model", "fill")
    assert (code, err) == (0, "")
    extended = queue.get(int(out.strip()))
    assert (extended.model, extended.width, extended.strength) == ("fill", 80, 1.0)
    queue.db.dispose()
