"""A checkpoint file without one of its parts: refused at submit in one sentence, from its
header; and a model that fails to load anyway fails its job in one sentence too.

The files are the tiny random SD 1.x and SDXL checkpoints (original LDM key names, as
artists download them) with a part's weights left out. `submit` runs as a user runs it,
`python -m app submit`, in its own process; the failing load runs through a real job run
on a real SQLite queue with the real runner and loader.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file

from app.cli import main
from app.engine.generation.device import CPU
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import (
    CHECKPOINTS_SUBFOLDER,
    ModelSearchPath,
    resolve_model,
)
from app.engine.generation.load.pipelines import PipelineCache, SingleFileConfigs
from app.engine.generation.runner import Runner
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.states import JobStatus
from app.engine.workers.job_run import JobRun, RunContext
from tests.engine.generation.tiny_architectures import single_files, tiny_configs, tiny_folders

__all__ = ["single_files", "tiny_configs", "tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

REPO = Path(__file__).resolve().parents[3]
CLIP_POSITIONS = "cond_stage_model.transformer.text_model.embeddings.position_embedding.weight"

# (architecture, the prefix of the part left out, what the refusal must name)
WITHOUT_A_PART = [
    pytest.param(Architecture.SD1, "model.diffusion_model.", "without its UNet", id="sd1-unet"),
    pytest.param(Architecture.SD1, "first_stage_model.", "without its VAE", id="sd1-vae"),
    pytest.param(Architecture.SD1, "cond_stage_model.", "no text encoder", id="sd1-clip"),
    pytest.param(Architecture.SDXL, "model.diffusion_model.", "without its UNet", id="sdxl-unet"),
    pytest.param(Architecture.SDXL, "first_stage_model.", "without its VAE", id="sdxl-vae"),
    pytest.param(
        Architecture.SDXL,
        "conditioner.embedders.0.",
        "without its first text encoder (CLIP ViT-L)",
        id="sdxl-clip-l",
    ),
    pytest.param(
        Architecture.SDXL,
        "conditioner.embedders.1.",
        "without its second text encoder (OpenCLIP ViT-bigG)",
        id="sdxl-clip-g",
    ),
]


def without(source: Path, dest: Path, leave_out: str) -> Path:
    """A copy of the checkpoint `source` without the weights whose names start `leave_out`."""
    state = load_file(str(source))
    kept = {name: weights for name, weights in state.items() if not name.startswith(leave_out)}
    assert len(kept) < len(state), leave_out
    dest.parent.mkdir(parents=True, exist_ok=True)
    save_file(kept, str(dest))
    return dest


def app_command(home: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EASEL_HOME": str(home), "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "app", *argv],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(("arch", "leave_out", "named"), WITHOUT_A_PART)
def test_submit_refuses_a_checkpoint_without_a_part_in_one_line(
    single_files: dict[Architecture, Path],
    easel_home: Path,
    arch: Architecture,
    leave_out: str,
    named: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    checkpoints = easel_home / "models" / CHECKPOINTS_SUBFOLDER
    path = without(single_files[arch], checkpoints / "partial.safetensors", leave_out)
    listed = resolve_model("partial", ModelSearchPath(user=(easel_home / "models",)))
    assert not listed.supported and listed.label == "unsupported"  # what the picker shows
    assert named in listed.unsupported_reason

    done = app_command(easel_home, "submit", "a red circle", "--model", "partial")
    assert done.returncode == 2, done.stderr
    assert done.stdout == "" and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert named in done.stderr and str(path) in done.stderr
    assert "Traceback" not in done.stderr and "from_single_file" not in done.stderr
    # Nothing stored: read in this process (a second `python -m app` cost a second a case).
    assert main(["jobs", "--all", "--json"]) == 0
    assert capsys.readouterr().out.strip() == "[]"


def test_the_complete_files_pass_the_same_check(single_files: dict[Architecture, Path]) -> None:
    for path in single_files.values():
        found = resolve_model(str(path))
        assert found.supported, found.unsupported_reason


def run_one_job(queue: JobQueue, home: Path, runner: Runner, model: str) -> tuple[str, bool | None]:
    """Submit a job on `model` and run it as a worker does; (its error, transient?)."""
    queue.submit(GenerationParams("a red circle", model=model, steps=2, width=64, height=64))
    job = queue.claim("worker-a")
    assert job is not None
    context = RunContext(
        queue=queue, worker_id="worker-a", runner=runner, outputs_dir=home / "outputs",
        checkpoints_dir=home / "checkpoints", send=lambda *_args, **_fields: None,
        pause_requested=lambda: None, heartbeat_interval_s=0.1,
    )  # fmt: skip
    JobRun(context, job).run()
    failed = queue.get(job.id or 0)
    assert failed.status == JobStatus.FAILED
    return failed.error or "", failed.error_transient


def runner_on(folder: Path, configs: SingleFileConfigs | None) -> Runner:
    search = ModelSearchPath(user=(folder,))
    return Runner(
        device=CPU,
        resolve=lambda name: resolve_model(name, search),
        cache=PipelineCache(configs=configs),
        threads=1,
    )


def test_a_load_that_fails_anyway_fails_the_job_in_one_sentence(
    single_files: dict[Architecture, Path],
    tiny_configs: SingleFileConfigs,
    queue: JobQueue,
    tmp_path: Path,
) -> None:
    """Its header has every part, but diffusers does not find the text encoder (the weight
    it looks for is gone): its message is a page telling the user to write Python."""
    damaged = without(
        single_files[Architecture.SD1], tmp_path / "damaged.safetensors", CLIP_POSITIONS
    )
    assert resolve_model(str(damaged)).supported  # so submit accepts it
    error, transient = run_one_job(queue, tmp_path, runner_on(tmp_path, tiny_configs), "damaged")
    assert len(error.splitlines()) == 1, error
    assert error == (
        f"model 'damaged' ({damaged}) could not be loaded as SD 1.x: its text encoder "
        "weights are missing or not in a layout Easel knows"
    )
    assert transient is False  # the same file fails the same way: no automatic retry


def test_a_checkpoint_of_other_sizes_than_the_shipped_configs_fails_in_one_sentence(
    single_files: dict[Architecture, Path], queue: JobQueue, tmp_path: Path
) -> None:
    """The tiny file against the real SD 1.x configs: a fine-tune of another layout.
    diffusers' message advises passing `low_cpu_mem_usage=False` to its Python API."""
    odd = tmp_path / "odd.safetensors"
    odd.write_bytes(single_files[Architecture.SD1].read_bytes())
    error, _ = run_one_job(queue, tmp_path, runner_on(tmp_path, None), "odd")
    assert len(error.splitlines()) == 1 and "`" not in error and "low_cpu_mem_usage" not in error
    assert error.startswith(f"model 'odd' ({odd}) could not be loaded as SD 1.x: ")
    assert "its weights do not have the sizes of SD 1.x" in error
