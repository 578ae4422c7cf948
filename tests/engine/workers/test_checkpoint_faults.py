"""Saved progress that cannot be trusted (issue 10 item 1), with the real tiny pipeline.

A job is paused mid-denoise through the real queue and `JobRun`; its checkpoint file is
then damaged the way a failing disk or a careless hand would; the resumed job must end
with the image of an uninterrupted run, the bad file set aside (renamed, not deleted), and
the timeline saying what happened. Latents that turn NaN fail the job instead of writing
a garbage image.
"""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from app.engine.generation.errors import NonFiniteLatents
from app.engine.generation.loop.checkpoint import load_checkpoint, save_checkpoint
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.job_run import JobRun
from app.models.tables import Job
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.test_job_run import Sent, claim, context

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

S = JobStatus
STEPS = 8
PAUSE_AT = 5


def tiny_params(seed: int = 1234) -> GenerationParams:
    return GenerationParams(
        prompt="a lighthouse at dusk", model=TINY_MODEL, scheduler="Euler a", steps=STEPS,
        cfg=7.0, width=64, height=64, seed=seed,
    )  # fmt: skip


def reference_image(runner: Runner, params: GenerationParams, folder: Path) -> np.ndarray:
    out = folder / f"reference-{params.seed}.png"
    runner.run(
        params, output_path=out, checkpoint_path=folder / "ref.ckpt",
        on_step=lambda _: StepDecision.CONTINUE,
    )  # fmt: skip
    return pixels(out)


def pixels(path: Path | str) -> np.ndarray:
    with Image.open(path) as image:
        return np.asarray(image.convert("RGB"), dtype=np.int16)


def run_once(queue: JobQueue, home: Path, runner: Runner, sent: Sent | None = None) -> Job:
    ctx = context(queue, home, sent or Sent(), runner=runner)
    job = claim(queue)
    JobRun(ctx, job).run()
    return queue.get(job.id or 0)


def paused_job(queue: JobQueue, home: Path, runner: Runner, seed: int = 1234) -> Job:
    job_id = queue.submit(tiny_params(seed))
    sent = Sent()
    sent.at_step[PAUSE_AT] = lambda: queue.pause(job_id)
    job = run_once(queue, home, runner, sent)
    assert job.status == S.PAUSED and job.progress_step == PAUSE_AT
    assert job.checkpoint_path and Path(job.checkpoint_path).is_file()
    return job


def resume(queue: JobQueue, home: Path, runner: Runner, job: Job) -> Job:
    queue.resume(job.id or 0)
    return run_once(queue, home, runner)


def overwrite_inside(path: Path, count: int = 4096) -> None:
    """`dd if=/dev/urandom of=PATH bs=1 seek=... count=4096 conv=notrunc`, inside the file."""
    size = path.stat().st_size
    assert size > 2 * count, "the checkpoint is too small to damage inside"
    with open(path, "r+b") as handle:
        handle.seek(size // 2)
        handle.write(os.urandom(count))


def last_message(queue: JobQueue, job_id: int) -> str:
    return queue.timeline(job_id)[-1].message


def set_aside_files(home: Path) -> list[Path]:
    return sorted((home / "checkpoints").glob("*.damaged-*"))


def test_a_checkpoint_damaged_inside_is_set_aside_and_the_job_starts_over(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    expected = reference_image(tiny_runner, tiny_params(), tmp_path)
    job = paused_job(queue, tmp_path, tiny_runner)
    damaged = Path(job.checkpoint_path or "")
    original = damaged.read_bytes()
    overwrite_inside(damaged)
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.SUCCESS
    assert np.abs(pixels(done.output_path or "") - expected).max() == 0
    message = last_message(queue, done.id or 0)
    assert message.startswith("the saved progress was damaged; started over from step 0")
    assert "checksum" in message
    [kept] = set_aside_files(tmp_path)
    # Adopted by the new claim (renamed to its own name), then set aside: same bytes.
    assert kept.name.startswith(f"job-{done.id}-") and ".ckpt.damaged-" in kept.name
    assert len(kept.read_bytes()) == len(original) and kept.read_bytes() != original


def test_a_truncated_checkpoint_is_set_aside_with_a_note(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    job = paused_job(queue, tmp_path, tiny_runner)
    path = Path(job.checkpoint_path or "")
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.SUCCESS
    assert "the saved progress was damaged; started over from step 0" in last_message(
        queue, done.id or 0
    )
    assert "truncated" in last_message(queue, done.id or 0)
    assert len(set_aside_files(tmp_path)) == 1


def test_a_checkpoint_of_other_parameters_is_set_aside_with_a_note(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    expected = reference_image(tiny_runner, tiny_params(), tmp_path)
    other = paused_job(queue, tmp_path, tiny_runner, seed=99)
    job = paused_job(queue, tmp_path, tiny_runner)
    # Someone copied the other job's progress over this one's.
    Path(job.checkpoint_path or "").write_bytes(Path(other.checkpoint_path or "").read_bytes())
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.SUCCESS
    assert np.abs(pixels(done.output_path or "") - expected).max() == 0
    message = last_message(queue, done.id or 0)
    assert message.startswith("the saved progress was made for other parameters; started over")
    assert "seed: 99 in the checkpoint, 1234 requested" in message
    assert len(set_aside_files(tmp_path)) == 1


def test_a_deleted_checkpoint_leaves_a_note(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    job = paused_job(queue, tmp_path, tiny_runner)
    Path(job.checkpoint_path or "").unlink()
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.SUCCESS
    assert "was missing; started over from step 0" in last_message(queue, done.id or 0)


def test_an_intact_checkpoint_resumes_to_the_same_image_and_says_so(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    expected = reference_image(tiny_runner, tiny_params(), tmp_path)
    job = paused_job(queue, tmp_path, tiny_runner)
    sent = Sent()
    queue.resume(job.id or 0)
    done = run_once(queue, tmp_path, tiny_runner, sent)
    assert done.status == S.SUCCESS
    assert np.abs(pixels(done.output_path or "") - expected).max() == 0
    assert sent.steps() == list(range(PAUSE_AT + 1, STEPS + 1))
    assert last_message(queue, done.id or 0).startswith(f"resumed from step {PAUSE_AT}; wrote ")
    assert not set_aside_files(tmp_path) and not any((tmp_path / "checkpoints").iterdir())


def test_nan_latents_fail_the_job_and_write_no_image(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner
) -> None:
    job = paused_job(queue, tmp_path, tiny_runner)
    path = Path(job.checkpoint_path or "")
    checkpoint = load_checkpoint(path).checkpoint
    checkpoint.latents[0, 0, 0, 0] = float("nan")
    save_checkpoint(path, checkpoint)  # a valid file holding poisoned numbers
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.FAILED
    assert "invalid values (NaN or infinity) at step 6 of 8" in (done.error or "")
    assert not any((tmp_path / "outputs").glob("*.png"))


def test_nan_from_the_model_stops_the_runner(tiny_runner: Runner, tmp_path: Path) -> None:
    out, ckpt = tmp_path / "out.png", tmp_path / "job.ckpt"
    params = tiny_params()
    tiny_runner.run(
        params, output_path=out, checkpoint_path=ckpt,
        on_step=lambda p: StepDecision.PAUSE if p.step == 2 else StepDecision.CONTINUE,
    )  # fmt: skip
    checkpoint = load_checkpoint(ckpt).checkpoint
    save_checkpoint(ckpt, replace(checkpoint, latents=torch.full_like(checkpoint.latents, np.inf)))
    seen: list[int] = []

    def watch(progress: StepProgress) -> StepDecision:
        seen.append(progress.step)
        return StepDecision.CONTINUE

    with pytest.raises(NonFiniteLatents, match="at step 3 of 8"):
        tiny_runner.run(params, output_path=out, checkpoint_path=ckpt, on_step=watch)
    assert seen == [] and not out.exists()


def test_a_pause_with_a_full_disk_is_paused_without_progress(
    queue: JobQueue, tmp_path: Path, tiny_runner: Runner, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 10 item 5: ENOSPC at the save call site never turns the artist's pause into FAILED."""
    from app.engine.generation import runner as runner_module

    def disk_full(path: Path, checkpoint: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(runner_module, "save_checkpoint", disk_full)
    job_id = queue.submit(tiny_params())
    sent = Sent()
    sent.at_step[PAUSE_AT] = lambda: queue.pause(job_id)
    job = run_once(queue, tmp_path, tiny_runner, sent)
    assert job.status == S.PAUSED and job.checkpoint_path is None
    assert last_message(queue, job_id) == (
        "the progress could not be saved (No space left on device); it will start over from step 0"
    )
    monkeypatch.undo()
    expected = reference_image(tiny_runner, tiny_params(), tmp_path)
    done = resume(queue, tmp_path, tiny_runner, job)
    assert done.status == S.SUCCESS
    assert np.abs(pixels(done.output_path or "") - expected).max() == 0
