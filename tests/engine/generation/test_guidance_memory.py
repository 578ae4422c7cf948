"""ControlNets and IP-Adapters in the memory budget: counted beside their pipeline while jobs
need them (another model makes room for them), dropped when no job does; in low-VRAM mode
they are offloaded as the pipeline is (accelerate's hooks, placed on a CPU here: only a GPU
shows the memory they save)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.files.architecture import Architecture
from app.engine.generation.files.sources import ModelInfo
from app.engine.generation.guidance.controlnets import find_controlnet
from app.engine.generation.guidance.ip_adapters import find_ip_adapter
from app.engine.generation.load.pipelines import PipelineCache
from app.engine.generation.memory import MemoryBudget, module_bytes, pipeline_bytes
from app.engine.generation.outcome import OutcomeKind
from app.engine.generation.runner import Runner
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.run_inputs import RunInputs
from tests.engine.generation.test_controlnet import control_png, upload
from tests.engine.generation.test_ip_adapter import ADAPTER, reference_png
from tests.engine.generation.tiny_architectures import go_on, max_diff, model_info, params_for
from tests.engine.generation.tiny_architectures import pixels as pixels_of

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from app.testing.tiny.unet import (
        write_tiny_controlnet,
        write_tiny_ip_adapter,
        write_tiny_pipeline,
    )

    root = tmp_path_factory.mktemp("guidance-memory")
    write_tiny_ip_adapter(root / "ipadapter" / "models", architecture=Architecture.SD1)
    return {
        "a": write_tiny_pipeline(root / "a", architecture=Architecture.SD1),
        "b": write_tiny_pipeline(root / "b", architecture=Architecture.SD1, seed=5),
        "nets": root / "controlnet",
        "net": write_tiny_controlnet(root / "controlnet" / "net"),
        "adapters": root / "ipadapter",
    }


def runner_for(folders: dict[str, Path], cache: PipelineCache | None = None) -> Runner:
    from app.engine.generation.device import CPU

    models: dict[str, ModelInfo] = {name: model_info(folders[name], name) for name in "ab"}
    return Runner(
        device=CPU, resolve=models.__getitem__, threads=1, cache=cache,
        resolve_control=lambda name: find_controlnet(name, [folders["nets"]]),
        resolve_reference=lambda name: find_ip_adapter(name, [folders["adapters"]]),
    )  # fmt: skip


def guided(model: str, control: bool = True, reference: bool = False) -> GenerationParams:
    layers = [ControlLayer(upload(control_png(7)), "net", "canny")] if control else []
    references = [ReferenceImage(upload(reference_png()), ADAPTER["sd1"], 0.7)] if reference else []
    return params_for(
        model, "Euler a", steps=2, control=encode_control(layers),
        reference=encode_reference(references),
    ).validated()  # fmt: skip


def run(runner: Runner, params: GenerationParams, folder: Path, name: str) -> Any:
    inputs = RunInputs(
        control_images=[control_png(7)] if params.control else [],
        reference_images=[reference_png()] if params.reference else [],
    )
    outcome = runner.run(
        params, inputs, output_path=folder / f"{name}.png",
        checkpoint_path=folder / f"{name}.ckpt", on_step=go_on,
    )  # fmt: skip
    assert outcome.kind is OutcomeKind.COMPLETED and outcome.image_path is not None
    return pixels_of(outcome.image_path)


def test_a_controlnet_counts_in_the_budget_while_its_jobs_need_it(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """Two models fit the budget, not with a ControlNet beside one: the other goes while
    guided jobs run, and the net goes as soon as a job names none."""
    from app.engine.generation.guidance.control import _load

    probe = runner_for(folders)
    size = pipeline_bytes(probe.load("a").pipe)
    net = module_bytes(
        [_load(find_controlnet("net", [folders["nets"]]), probe.load("a").pipe.unet.dtype, None)]
    )
    runner = runner_for(folders, PipelineCache(budget=MemoryBudget(2 * size + net // 2)))
    run(runner, guided("a", control=False), tmp_path, "a")
    run(runner, guided("b", control=False), tmp_path, "b")
    assert sorted(runner.held_models()) == ["a", "b"]  # both fit without guidance
    run(runner, guided("b"), tmp_path, "b-guided")
    assert runner.held_models() == ["b"] and len(runner._controlnets.loaded) == 1
    run(runner, guided("b", control=False), tmp_path, "b-plain")
    assert runner._controlnets.loaded == []  # no job needs it: gone
    run(runner, guided("a", control=False), tmp_path, "a-again")
    assert sorted(runner.held_models()) == ["a", "b"]  # room again


def test_an_ip_adapter_is_counted_with_its_pipeline_and_uncounted_when_unloaded(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    cache = PipelineCache()
    runner = runner_for(folders, cache)
    run(runner, guided("a", control=False), tmp_path, "plain")
    [entry] = cache._entries.values()
    plain = entry.size_bytes
    run(runner, guided("a", control=False, reference=True), tmp_path, "referenced")
    encoder = module_bytes([entry.loaded.pipe.image_encoder])
    assert entry.size_bytes >= plain + encoder  # the encoder, the projection, the processors
    run(runner, guided("a", control=False), tmp_path, "plain-again")
    assert entry.size_bytes == plain


def test_in_low_vram_mode_controlnets_and_the_image_encoder_get_offload_hooks(
    folders: dict[str, Path], tmp_path: Path
) -> None:
    """The pipeline offloaded as low-VRAM mode does (`enable_model_cpu_offload`, here to
    the CPU itself): its ControlNet and its IP-Adapter's encoder get accelerate's hooks
    too, and the image is the one made without offloading."""
    from accelerate.hooks import CpuOffload

    plain = run(runner_for(folders), guided("a", reference=True), tmp_path, "plain")
    runner = runner_for(folders)
    pipe = runner.load("a").pipe
    pipe.enable_model_cpu_offload(device="cpu")
    image = run(runner, guided("a", reference=True), tmp_path, "offloaded")
    [net] = runner._controlnets.nets
    assert isinstance(getattr(net, "_hf_hook", None), CpuOffload)
    assert isinstance(getattr(pipe.image_encoder, "_hf_hook", None), CpuOffload)
    assert isinstance(getattr(pipe.unet, "_hf_hook", None), CpuOffload)
    assert max_diff(image, plain) == 0
    run(runner, guided("a", control=False), tmp_path, "unloaded")
    assert pipe.image_encoder is None and isinstance(pipe.unet._hf_hook, CpuOffload)
