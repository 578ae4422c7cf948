"""`export N --gif/--webp`: a video job's clip as an animation, as a user types it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from PIL import Image
from sqlalchemy import update

from app.cli import main
from app.engine.jobs.params import KIND_VIDEO, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.outputs.video import write_video
from app.models.tables import JOB

FRAMES, FPS = 5, 8
COLOURS = [(40 * i, 200 - 40 * i, 90) for i in range(FRAMES)]


def finished(queue: JobQueue, path: Path, kind: str = KIND_VIDEO) -> int:
    """A job finished with `path` as its output (the row written as a worker would)."""
    params = GenerationParams("a clip", width=32, height=32, kind=kind)
    if kind == KIND_VIDEO:
        params = replace(params, frames=FRAMES, fps=FPS)
    job_id = queue.submit(params)
    if kind == KIND_VIDEO:
        write_video([Image.new("RGB", (32, 32), c) for c in COLOURS], path, params)
    with queue.db.write() as conn:
        conn.execute(update(JOB).where(JOB.c.id == job_id).values(
            status=JobStatus.SUCCESS.value, output_path=str(path)))  # fmt: skip
    return job_id


@pytest.mark.parametrize(("flag", "suffix"), [("--gif", ".gif"), ("--webp", ".webp")])
def test_a_clip_exports_as_a_looping_animation_at_its_fps(
    queue: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, suffix: str
) -> None:
    job_id = finished(queue, tmp_path / "outputs" / "000001-1.mp4")
    out = tmp_path / "out"
    code = main(["--db", queue.db.location, "export", str(job_id), flag, "--out", str(out)])
    assert code == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == out / f"000001-1{suffix}"
    with Image.open(printed) as animation:
        assert getattr(animation, "n_frames", 1) == FRAMES and animation.info["loop"] == 0
        animation.seek(FRAMES - 1)  # the last frame is the clip's last, colours near it
        last = animation.convert("RGB").getpixel((16, 16))
        assert isinstance(last, tuple)
        assert all(abs(a - b) <= 12 for a, b in zip(last, COLOURS[-1], strict=True))
        assert animation.info["duration"] in (120, 125)  # 1/8 s (GIF counts hundredths)


def test_a_named_file_of_the_other_format_an_image_job_and_a_file_there_are_refused(
    queue: JobQueue, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clip_id = finished(queue, tmp_path / "c.mp4")
    image_id = finished(queue, tmp_path / "i.png", kind="generate")
    db = ["--db", queue.db.location, "export"]
    not_a_clip = f"Job {image_id} made an image, not a clip: --webp takes a video job"
    wrong_name = "--gif writes a .gif file: name it x.gif"
    cases = [
        ([str(clip_id), "--gif", str(tmp_path / "x.webp")], wrong_name),
        ([str(image_id), "--webp"], not_a_clip),
    ]
    for argv, message in cases:
        assert main([*db, *argv]) == 2
        assert capsys.readouterr().err == f"error: {message}\n"
    there = tmp_path / "there.gif"
    there.write_bytes(b"mine")
    assert main([*db, str(clip_id), "--gif", str(there)]) == 2
    assert capsys.readouterr().err == f"error: {there} already exists; nothing was written\n"
    assert there.read_bytes() == b"mine" and not (tmp_path / "x.webp").exists()
