"""A custom models folder (the settings' `models_dir`) reaches every resolver a real worker
uses: a ControlNet job and an IP-Adapter job whose nets live only there both finish."""

from __future__ import annotations

import hashlib
import io
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.guidance.controlnets import CONTROLNET_SUBFOLDER
from app.engine.generation.guidance.ip_adapters import IP_ADAPTER_SUBFOLDER
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.states import JobStatus
from app.engine.settings import Settings, save_settings
from app.engine.workers.worker import default_runner
from tests.engine.conftest import TINY_MODEL
from tests.engine.workers.worker_fixtures import Harness, harness, worker_config

pytestmark = pytest.mark.slow

NET = "cn-custom"
ADAPTER = "ip-adapter_tiny"  # the file name `write_tiny_ip_adapter` writes


def png(seed: int) -> bytes:
    rgb = np.random.default_rng(seed).integers(0, 256, (32, 32, 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def upload(image: bytes) -> str:
    return "upload:" + hashlib.sha256(image).hexdigest()


@pytest.fixture
def custom_models(tmp_path: Path, tiny_model_dir: Path, easel_home: Path) -> Path:
    """A models folder outside the data folder, named by the settings: the tiny model (a
    link), a tiny ControlNet and a tiny IP-Adapter, in the layout artists download."""
    from app.testing.tiny.unet import write_tiny_controlnet, write_tiny_ip_adapter

    folder = tmp_path / "elsewhere" / "models"
    folder.mkdir(parents=True)
    (folder / TINY_MODEL).symlink_to(tiny_model_dir, target_is_directory=True)
    write_tiny_controlnet(folder / CONTROLNET_SUBFOLDER / NET, architecture=Architecture.SD1)
    write_tiny_ip_adapter(folder / IP_ADAPTER_SUBFOLDER / "models", architecture=Architecture.SD1)
    easel_home.mkdir(parents=True, exist_ok=True)
    save_settings(Settings(models_dir=str(folder)))
    return folder


@pytest.fixture
def h(queue: JobQueue, tmp_path: Path, custom_models: Path) -> Iterator[Harness]:
    with harness(queue, tmp_path / "home") as h:
        yield h


def test_controlnet_and_ip_adapter_jobs_find_their_nets_in_the_settings_models_folder(
    h: Harness, queue: JobQueue
) -> None:
    base = GenerationParams("a red circle", model=TINY_MODEL, steps=3, width=32, height=32, seed=5)
    control_png, reference_png = png(1), png(2)
    controlled = replace(
        base, control=encode_control([ControlLayer(upload(control_png), NET, "canny")])
    )
    referenced = replace(
        base, reference=encode_reference([ReferenceImage(upload(reference_png), ADAPTER, 0.7)])
    )
    config = worker_config(h.queue, h.home, runner_factory=default_runner, warm_model=None)
    h.supervisor(config=replace(config, torch_threads=1)).start()
    control_job = queue.submit(controlled, inputs=RunInputs(control_images=[control_png]))
    reference_job = queue.submit(referenced, inputs=RunInputs(reference_images=[reference_png]))
    for job_id in (control_job, reference_job):
        job = h.wait_settled(job_id, timeout=120)
        assert job.status == JobStatus.SUCCESS, job.error
        assert job.output_path and Path(job.output_path).is_file()
