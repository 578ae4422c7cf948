"""Generation benchmark: prints `name: value` lines.

Uses the bundled model (resources/models/easel-tiny) if it is there, else a tiny random
pipeline written to a temp folder. Run: `.venv/bin/python benchmarks/generation.py [--threads N]`.

The queue figures (issue 11) run a warm worker in this process on a real SQLite queue, with
the same runner (so the same model, device and threads) as the direct loop it is compared
with; each ratio is measured in the same run:
  step_ms_<size>             median UNet + scheduler step
  queue_vs_direct_ratio_<s>  images/s through submit + a warm headless worker (as `python -m
                             app worker`) / the runner in a loop; median of 3 alternating rounds
  queue_vs_direct_ratio_64x64_watched  the same with a listener, so previews are made and sent
  checkpoint_overhead_ratio  images/s with rolling checkpoints every second / with none
  cancel_latency_steps_p95   steps run after a cancel request (>= 20, at random steps)
  pause_latency_steps_p95    the same for pause
  resume_time_ratio          paused-and-resumed run time / uninterrupted (median of 5)
  cancel_latency_steps_p95_postgresql  with --db URL: the same on PostgreSQL (and pause_)
  cancel_while_loading_s     a request to the settled job while a worker process loads the
  (pause_, _decoding_s)      model or decodes the image (no step checkpoint: the grace kill)
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
import torch
from PIL import Image

from app.engine.generation import denoise
from app.engine.generation.device import pick_device
from app.engine.generation.files.sources import ModelInfo, ModelSource
from app.engine.generation.outcome import StepDecision, StepProgress
from app.engine.generation.runner import Runner
from app.engine.jobs.params import SCHEDULERS, GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.paths import HOME_ENV
from app.engine.settings import Settings
from app.engine.store.opening import open_queue
from app.engine.workers.liveness import WorkerIdentity, new_token, this_host
from app.engine.workers.messages import MessageKind, WorkerMessage
from app.engine.workers.supervisor import Supervisor
from app.engine.workers.worker import Outbox, RunnerFactory, Worker, WorkerConfig
from app.models.postgres import scratch_schema
from app.testing.slow_phases import slow_decoding_runner, slow_loading_runner
from app.testing.tiny.unet import write_tiny_pipeline
from benchmarks.architectures import run_architectures, run_file_layouts
from benchmarks.guidance import run_guidance
from benchmarks.inpaint import run_inpaint

BUNDLED = Path(__file__).resolve().parents[1] / "resources" / "models" / "easel-tiny"
STEPS, PAUSE_AT, TIMED_STEPS = 8, 3, 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--model", type=Path, default=None, help="a diffusers pipeline folder")
    parser.add_argument("--jobs", type=int, default=12, help="jobs per queue/direct figure")
    parser.add_argument("--skip-queue", action="store_true", help="only the model figures")
    parser.add_argument(
        "--db", metavar="URL",
        help="also measure cancel and pause latency on this PostgreSQL server (a scratch "
        "schema): a worker there learns of requests by LISTEN, not by reading its row",
    )  # fmt: skip
    args = parser.parse_args()
    _quiet_progress_bars()
    with tempfile.TemporaryDirectory() as temp:
        work = Path(temp)
        model = _model(args.model, work)
        runner = Runner(
            device=pick_device(), resolve=lambda _name: model, threads=args.threads or None
        )
        report("model", f"{model.name} ({model.path})")
        report("device", f"{runner.device.device}/{runner.device.dtype_name}")
        report("threads", torch.get_num_threads())
        started = time.perf_counter()
        loaded = runner.load(model.name)
        report("load_s", f"{time.perf_counter() - started:.2f}")
        size = _default_size(loaded.pipe)
        report("size", f"{size}x{size}")
        params = GenerationParams(
            prompt="a red circle on a blue background",
            model=model.name,
            steps=STEPS,
            cfg=5.0,
            width=size,
            height=size,
            seed=42,
        )
        report("step_ms", f"{_step_ms(loaded.pipe, params):.1f}")
        report("preview_ms", f"{_preview_ms(runner, params):.2f}")
        kb, diff = _pause_resume(runner, params, work)
        report("checkpoint_kb", f"{kb:.1f}")
        report("pause_resume_max_diff", diff)
        if not args.skip_queue:
            _queue_figures(runner, params, work, args.jobs)
            if args.db:
                _postgresql_latency_figures(runner, params, work, args.db)
        run_architectures()  # per architecture on tiny random models: name[arch]: value
        run_file_layouts()  # Flux.1 / SD 3.5 as single, split, GGUF and fp8 files
        run_inpaint()  # inpaint_same_as_diffusers_max_diff_<arch>, on tiny random models
        run_guidance()  # controlnet_same_as_diffusers_max_diff_<arch>, step overhead ratio
        _mask_editor_figures()


def _mask_editor_figures() -> None:
    """`mask_editor_max_stall_ms` (benchmarks/mask_editor.py) in a process of its own: the
    window's, with Qt and without torch; offscreen when there is no display."""
    import subprocess

    script = Path(__file__).resolve().parent / "mask_editor.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    for line in done.stdout.splitlines():
        if line.startswith("mask_editor_"):
            print(line, flush=True)
    if done.returncode:
        report("mask_editor_max_stall_ms", f"not measured ({done.stderr.strip()[-200:]})")


# --- the queue against the model called directly (issue 11) ------------------------------------

QUEUE_STEPS = 20
RATIO_ROUNDS = 3
RESUME_ROUNDS = 5  # a paused-and-resumed 64x64 job lasts under a second: take the median
LATENCY_REQUESTS = 20


@dataclass
class _Bench:
    """A warm worker in this process on a fresh SQLite queue; `on_message` sees what it sends.

    Without `on_message` the worker is headless (`python -m app worker`): nobody reads its
    messages, so it makes no previews."""

    runner: Runner
    work: Path
    checkpoint_interval_s: float = 0.0
    queue: JobQueue = field(init=False)
    on_message: Callable[[WorkerMessage], object] | None = None
    location: str | None = None  # a PostgreSQL URL instead of a new SQLite file
    ended_at: float = field(init=False, default=0.0)  # when the last `drain` returned

    def __post_init__(self) -> None:
        folder = self.work / f"queue-{new_token()}"
        location = self.location or str(folder / "easel.db")
        self.queue = open_queue(location)
        self.config = WorkerConfig(
            db_path=location, outputs_dir=str(folder / "outputs"),
            checkpoints_dir=str(folder / "checkpoints"), liveness_dir=str(folder / "workers"),
            warm_model=None, until_idle=True, checkpoint_interval_s=self.checkpoint_interval_s,
        )  # fmt: skip

    def drain(self) -> float:
        """Run the worker until nothing is pending; seconds taken."""
        outbox = Outbox(self.on_message)
        worker_id = str(WorkerIdentity(this_host(), os.getpid(), new_token()))
        worker = Worker(self.config, self.queue, self.runner, worker_id, outbox)
        started = time.perf_counter()
        worker.run()
        self.ended_at = time.perf_counter()
        outbox.close()
        return self.ended_at - started


class _FirstRunNoted:
    """A runner that notes when its first run returned (a warm-up job's), else the same."""

    def __init__(self, runner: Runner) -> None:
        self._runner = runner
        self.first_returned_at: float | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runner, name)

    def run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self._runner.run(*args, **kwargs)
        finally:
            if self.first_returned_at is None:
                self.first_returned_at = time.perf_counter()


def _queue_figures(runner: Runner, base: GenerationParams, work: Path, jobs: int) -> None:
    for size in (64, 256):
        params = GenerationParams(**{**base.to_dict(), "width": size, "height": size,
                                     "steps": QUEUE_STEPS})  # fmt: skip
        report(f"step_ms_{size}x{size}", f"{_step_ms(runner.load(params.model).pipe, params):.1f}")
        count = jobs if size == 64 else max(2, jobs // 4)
        direct = partial(_direct_s, runner, params, work, count)
        headless = partial(_queued_s, runner, params, work, count, checkpoint_interval_s=0.0)
        report(f"queue_vs_direct_ratio_{size}x{size}", f"{_median_ratio(direct, headless):.3f}")
        if size == 64:  # a window listening: previews made and sent twice a second
            watched = partial(headless, on_message=_ignore)
            report("queue_vs_direct_ratio_64x64_watched", f"{_median_ratio(direct, watched):.3f}")
        if size == 256:
            saving = partial(_queued_s, runner, params, work, count, checkpoint_interval_s=1.0)
            report("checkpoint_overhead_ratio", f"{_median_ratio(headless, saving):.3f}")
    params = GenerationParams(**{**base.to_dict(), "width": 64, "height": 64, "steps": 30})
    report("cancel_latency_steps_p95", _latency_p95(runner, params, work, JobQueue.cancel))
    report("pause_latency_steps_p95", _latency_p95(runner, params, work, JobQueue.pause))
    resumes = [_resume_time_ratio(runner, params, work) for _ in range(RESUME_ROUNDS)]
    report("resume_time_ratio", f"{statistics.median(resumes):.3f}")
    _long_phase_figures(work)


# --- cancel and pause where no step checkpoint is reached (issue 11, item 3) -------------------

PHASES: dict[str, tuple[RunnerFactory, int]] = {
    # the runner that never leaves the phase, and the progress step that shows it is in it
    "loading": (slow_loading_runner, 0),
    "decoding": (slow_decoding_runner, STEPS),
}
ASKS = {
    "cancel": (JobQueue.cancel, JobStatus.CANCELLED),
    "pause": (JobQueue.pause, JobStatus.PAUSED),
}


def _long_phase_figures(work: Path) -> None:
    """Seconds from a request to the settled job while a real worker process loads the
    model or decodes the image (phases made endless here): the supervisor's grace kill
    ends them, with the default grace period."""
    settings = Settings()
    # The spawned workers read their settings and write their logs under this home.
    os.environ.setdefault(HOME_ENV, str(work / "home"))
    report("cancel_grace_s", settings.cancel_grace_s)
    for phase, (factory, at_step) in PHASES.items():
        for kind, (ask, wanted) in ASKS.items():
            seconds = _request_in_phase_s(work, settings, factory, at_step, ask, wanted)
            report(f"{kind}_while_{phase}_s", f"{seconds:.2f}")


def _request_in_phase_s(
    work: Path,
    settings: Settings,
    factory: RunnerFactory,
    at_step: int,
    ask: Callable[[JobQueue, int], object],
    wanted: JobStatus,
) -> float:
    folder = work / f"phase-{new_token()}"
    queue = open_queue(folder / "easel.db")
    config = WorkerConfig(
        db_path=str(folder / "easel.db"), outputs_dir=str(folder / "outputs"),
        checkpoints_dir=str(folder / "checkpoints"), liveness_dir=str(folder / "workers"),
        warm_model=None, runner_factory=factory, torch_threads=1,
    )  # fmt: skip
    supervisor = Supervisor(queue, config, settings, workers=1)
    supervisor.start()
    try:
        job_id = queue.submit(GenerationParams("a red circle", steps=STEPS, width=64, height=64))

        def in_phase() -> bool:
            job = queue.get(job_id)
            return job.status == JobStatus.PROCESSING and job.progress_step >= at_step

        _poll_until(supervisor, in_phase)
        asked = time.perf_counter()
        ask(queue, job_id)
        _poll_until(supervisor, lambda: queue.get(job_id).status == wanted)
        return time.perf_counter() - asked
    finally:
        supervisor.shutdown(timeout=5)
        queue.db.dispose()


def _poll_until(
    supervisor: Supervisor, condition: Callable[[], bool], limit_s: float = 120
) -> None:
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the job never got there; see the worker logs")
        supervisor.poll()
        time.sleep(0.05)


def _median_ratio(
    baseline: Callable[[], float],
    other: Callable[[], float],
    *,
    rounds: int = RATIO_ROUNDS,
    swap_order: bool = False,
) -> float:
    """baseline seconds / other seconds, the median of rounds that alternate the two: load
    from other programs on a shared machine then falls on both sides alike. `swap_order`:
    every other round runs `other` first, so neither side always runs in the other's wake
    (what the first of a pair leaves behind: caches, the allocator, a collection due)."""
    ratios = []
    for number in range(rounds):
        if swap_order and number % 2:
            other_s = other()
            ratios.append(baseline() / other_s)
        else:
            base_s = baseline()
            ratios.append(base_s / other())
    return statistics.median(ratios)


def _ignore(_message: WorkerMessage) -> None:
    """A listener that reads nothing: the worker behaves as under a window."""


def _direct_s(runner: Runner, params: GenerationParams, work: Path, count: int) -> float:
    runner.run(params, output_path=work / "warm.png", checkpoint_path=work / "w.ckpt", on_step=_go)
    started = time.perf_counter()
    for i in range(count):
        job = GenerationParams(**{**params.to_dict(), "seed": i})
        runner.run(
            job, output_path=work / f"d{i}.png", checkpoint_path=work / "d.ckpt", on_step=_go
        )
    return time.perf_counter() - started


def _queued_s(
    runner: Runner,
    params: GenerationParams,
    work: Path,
    count: int,
    *,
    checkpoint_interval_s: float,
    on_message: Callable[[WorkerMessage], object] | None = None,
    after_warm_job: bool = False,
) -> float:
    """Seconds for `count` jobs through a worker on a fresh queue, from the worker's start.

    `after_warm_job`: one more job first, as `_direct_s` warms the runner with one run, and
    the clock starts when that job's run returns: what a worker does once in its life (its
    row, READY, the first statements on its database, the ORM's first use and the full
    garbage collection that brings on: 0.3 s here, in whichever round came first) is not
    counted, and everything a job costs the queue is, the warm job's settling included."""
    noted = _FirstRunNoted(runner) if after_warm_job else None
    worker_runner = cast(Runner, noted or runner)
    bench = _Bench(worker_runner, work, checkpoint_interval_s, on_message=on_message)
    seeds = [count, *range(count)] if after_warm_job else list(range(count))
    ids = [bench.queue.submit(GenerationParams(**{**params.to_dict(), "seed": seed}))
           for seed in seeds]  # fmt: skip
    elapsed = bench.drain()
    assert all(bench.queue.get(i).status == JobStatus.SUCCESS for i in ids)
    bench.queue.db.dispose()
    if noted is not None:
        assert noted.first_returned_at is not None
        return bench.ended_at - noted.first_returned_at
    return elapsed


def _postgresql_latency_figures(
    runner: Runner, params: GenerationParams, work: Path, server: str
) -> None:
    params = GenerationParams(**{**params.to_dict(), "width": 64, "height": 64, "steps": 30})
    with scratch_schema(server) as url:
        for name, ask in (("cancel", JobQueue.cancel), ("pause", JobQueue.pause)):
            lag = _latency_p95(runner, params, work, ask, location=url)
            report(f"{name}_latency_steps_p95_postgresql", lag)


def _latency_p95(
    runner: Runner,
    params: GenerationParams,
    work: Path,
    ask: Callable[..., object],
    location: str | None = None,
) -> int:
    """Steps reported after the request, the way the app asks (from another thread)."""
    rng = random.Random(7)
    lags = [
        _steps_after_request(runner, params, work, ask, rng.randint(2, params.steps - 5), location)
        for _ in range(LATENCY_REQUESTS)
    ]
    return int(np.percentile(lags, 95, method="higher"))


def _steps_after_request(
    runner: Runner,
    params: GenerationParams,
    work: Path,
    ask: Callable[..., object],
    at: int,
    location: str | None = None,
) -> int:
    bench = _Bench(runner, work, location=location)
    job_id = bench.queue.submit(params)
    steps: list[int] = []

    def on_message(message: WorkerMessage) -> None:
        if message.kind is MessageKind.PROGRESS:
            steps.append(message.step)
            if message.step == at:
                ask(bench.queue, job_id)

    bench.on_message = on_message
    bench.drain()
    bench.queue.db.dispose()
    return max(steps) - at


def _resume_time_ratio(runner: Runner, params: GenerationParams, work: Path) -> float:
    uninterrupted = _Bench(runner, work, on_message=_ignore)  # watched, like the paused run
    uninterrupted.queue.submit(params)
    whole = uninterrupted.drain()
    bench = _Bench(runner, work)
    job_id = bench.queue.submit(params)

    def pause_halfway(message: WorkerMessage) -> None:
        if message.kind is MessageKind.PROGRESS and message.step == params.steps // 2:
            bench.queue.pause(job_id)

    bench.on_message = pause_halfway
    first = bench.drain()
    bench.on_message = _ignore
    bench.queue.resume(job_id)
    second = bench.drain()
    assert bench.queue.get(job_id).status == JobStatus.SUCCESS
    return (first + second) / whole


def _quiet_progress_bars() -> None:
    import diffusers
    import transformers

    diffusers.utils.logging.disable_progress_bar()
    transformers.utils.logging.disable_progress_bar()


def report(name: str, value: object) -> None:
    print(f"{name}: {value}", flush=True)


def _model(folder: Path | None, work: Path) -> ModelInfo:
    if folder is not None:
        return ModelInfo(folder.name, folder, ModelSource.USER)
    if (BUNDLED / "model_index.json").exists():
        return ModelInfo(BUNDLED.name, BUNDLED, ModelSource.BUNDLED)
    return ModelInfo("tiny-random", write_tiny_pipeline(work / "tiny-random"), ModelSource.USER)


def _default_size(pipe: object) -> int:
    unet, factor = getattr(pipe, "unet"), getattr(pipe, "vae_scale_factor")  # noqa: B009
    return int(unet.config.sample_size) * int(factor)


def _step_ms(
    pipe: object,
    params: GenerationParams,
    *,
    steps: int = TIMED_STEPS,
    sync: Callable[[], object] = lambda: None,
) -> float:
    """Median UNet + scheduler step with CFG (two UNet batches) of `steps`, after one
    warm-up step; `sync` waits for the device (a GPU runs its kernels after the call)."""
    timed = GenerationParams(**{**params.to_dict(), "steps": steps + 1})
    state = denoise.start(pipe, timed)
    denoise.advance(pipe, state)
    times = []
    while not state.finished:
        started = time.perf_counter()
        denoise.advance(pipe, state)
        sync()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _preview_ms(runner: Runner, params: GenerationParams) -> float:
    loaded = runner.load(params.model)
    state = denoise.start(loaded.pipe, params)
    denoise.advance(loaded.pipe, state)
    times = []
    for _ in range(20):
        started = time.perf_counter()
        loaded.previewer.png(state.latents, (params.width, params.height))
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def _pause_resume(runner: Runner, params: GenerationParams, work: Path) -> tuple[float, int]:
    """Largest checkpoint (KB) and largest pixel difference (1/255 units) over all schedulers."""
    sizes, diffs = [], []
    for scheduler in SCHEDULERS:
        job = GenerationParams(**{**params.to_dict(), "scheduler": scheduler})
        reference, resumed, ckpt = work / "ref.png", work / "job.png", work / "job.ckpt"
        runner.run(job, output_path=reference, checkpoint_path=work / "ref.ckpt", on_step=_go)
        runner.run(job, output_path=resumed, checkpoint_path=ckpt, on_step=_pause)
        sizes.append(ckpt.stat().st_size / 1024)
        runner.run(job, output_path=resumed, checkpoint_path=ckpt, on_step=_go)
        diffs.append(_max_diff(reference, resumed))
    return max(sizes), max(diffs)


def _go(_: StepProgress) -> StepDecision:
    return StepDecision.CONTINUE


def _pause(progress: StepProgress) -> StepDecision:
    return StepDecision.PAUSE if progress.step == PAUSE_AT else StepDecision.CONTINUE


def _max_diff(a: Path, b: Path) -> int:
    with Image.open(a) as first, Image.open(b) as second:
        return int(np.abs(np.asarray(first, np.int16) - np.asarray(second, np.int16)).max())


if __name__ == "__main__":
    main()
