"""Single-file checkpoints (original LDM key names) and what the listing says about files."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from app.engine.generation.device import CPU
from app.engine.generation.errors import UnsupportedModel
from app.engine.generation.files.architecture import Architecture, Prediction
from app.engine.generation.files.sources import ModelSearchPath, list_models, resolve_model
from app.engine.generation.load.pipelines import (
    PipelineCache,
    SingleFileConfigs,
    bundled_configs,
    shipped_tokenizer,
)
from app.engine.generation.runner import Runner
from app.testing.tiny.unet import UNET_ARCHITECTURES
from tests.engine.generation.tiny_architectures import (
    generate,
    max_diff,
    model_info,
    params_for,
    single_files,
    tiny_configs,
    tiny_folders,
)

__all__ = ["single_files", "tiny_configs", "tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.fixture(scope="module")
def tiny_configs_shared_vocabulary(
    tiny_configs: SingleFileConfigs, tmp_path_factory: pytest.TempPathFactory
) -> SingleFileConfigs:
    """Laid out as the shipped configs: tokenizer folders hold settings only, and one
    `clip-vocabulary` folder holds the (tiny) vocabulary for all of them."""
    import json

    from app.testing.tiny.unet import TOKENIZER_MERGES, tokenizer_vocab

    root = tmp_path_factory.mktemp("shipped-layout")
    shutil.copytree(tiny_configs.root, root, dirs_exist_ok=True)
    for folder in root.glob("*/tokenizer*"):
        (folder / "tokenizer.json").unlink()
        settings = json.loads((folder / "tokenizer_config.json").read_text())
        settings.setdefault("pad_token", "<|endoftext|>")
        (folder / "tokenizer_config.json").write_text(json.dumps(settings))
    shared = root / "clip-vocabulary"
    shared.mkdir()
    (shared / "vocab.json").write_text(json.dumps(tokenizer_vocab()))
    (shared / "merges.txt").write_text("#version: 0.2\n" + "\n".join(TOKENIZER_MERGES) + "\n")
    return SingleFileConfigs(root)


def test_checkpoint_files_are_detected_from_their_header(
    single_files: dict[Architecture, Path],
) -> None:
    sd1, sd2, sdxl = (model_info(single_files[a]) for a in UNET_ARCHITECTURES)
    assert (sd1.architecture, sd1.native_size) == (Architecture.SD1, 512)
    assert (sd2.architecture, sd2.prediction, sd2.native_size) == (
        Architecture.SD2,
        Prediction.V,
        768,
    )
    assert (sdxl.architecture, sdxl.native_size) == (Architecture.SDXL, 1024)
    assert sdxl.size_presets[0] == (1024, 1024) and sdxl.is_single_file


@pytest.mark.parametrize("shared_vocabulary", [False, True], ids=["full", "shipped-layout"])
@pytest.mark.parametrize("arch", UNET_ARCHITECTURES, ids=lambda a: a.value)
def test_a_single_file_generates_the_same_image_as_its_diffusers_folder(
    single_files: dict[Architecture, Path],
    tiny_folders: dict[Architecture, Path],
    tiny_configs: SingleFileConfigs,
    tiny_configs_shared_vocabulary: SingleFileConfigs,
    tmp_path: Path,
    arch: Architecture,
    shared_vocabulary: bool,
) -> None:
    if shared_vocabulary:
        tiny_configs = tiny_configs_shared_vocabulary
    file_model = model_info(single_files[arch], "m")
    from_file = Runner(
        device=CPU,
        resolve=lambda _n: file_model,
        cache=PipelineCache(configs=tiny_configs),
        threads=1,
    )
    folder_model = model_info(tiny_folders[arch], "m")
    from_folder = Runner(device=CPU, resolve=lambda _n: folder_model, threads=1)
    for scheduler in ("Euler a", "DPM++ 2M"):
        params = params_for("m", scheduler)
        ours = generate(from_file, params, tmp_path, f"file-{scheduler}")
        assert max_diff(ours, generate(from_folder, params, tmp_path, f"dir-{scheduler}")) == 0


def test_the_shipped_configs_cover_every_architecture() -> None:
    configs = bundled_configs()
    for arch, prediction in [
        (Architecture.SD1, Prediction.EPSILON),
        (Architecture.SD2, Prediction.V),
        (Architecture.SD2, Prediction.EPSILON),
        (Architecture.SDXL, Prediction.EPSILON),
    ]:
        folder = configs.folder(arch, prediction)
        assert (folder / "model_index.json").is_file(), folder
        assert (folder / "tokenizer" / "tokenizer_config.json").is_file(), folder
        assert (folder / "unet" / "config.json").is_file(), folder


def _fake_checkpoint(path: Path, keys: dict[str, tuple[int, ...]]) -> Path:
    save_file({key: torch.zeros(shape) for key, shape in keys.items()}, str(path))
    return path


UNET_IN = "model.diffusion_model.input_blocks.0.0.weight"
VAE_IN = "first_stage_model.encoder.conv_in.weight"
CLIP = "cond_stage_model.transformer.text_model.embeddings.position_embedding.weight"


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        ({UNET_IN: (320, 8, 3, 3), CLIP: (77, 8)}, "instruct-pix2pix"),
        (
            {UNET_IN: (320, 4, 3, 3), "conditioner.embedders.0.model.text_projection": (4, 4)},
            "refiner",
        ),
        ({"double_blocks.0.img_attn.norm.key_norm.scale": (4,)}, "Flux"),
        (
            {"model.diffusion_model.joint_blocks.0.x_block.attn.qkv.weight": (4, 4)},
            "an incomplete SD 3 transformer",
        ),
        ({"lora_unet_down_blocks_0_attentions_0_proj_in.lora_down.weight": (4, 4)}, "LoRA"),
        ({UNET_IN: (320, 4, 3, 3)}, "no text encoder"),
    ],
)
def test_files_that_are_not_checkpoints_are_listed_as_unsupported_with_the_reason(
    tmp_path: Path, keys: dict[str, tuple[int, ...]], reason: str
) -> None:
    _fake_checkpoint(tmp_path / "odd.safetensors", keys)
    [model] = list_models(ModelSearchPath(user=(tmp_path,)))
    assert model.name == "odd" and not model.supported
    assert reason in model.unsupported_reason and model.label == "unsupported"
    with pytest.raises(UnsupportedModel, match=reason):
        Runner(device=CPU, resolve=lambda _n: model).load("odd")


@pytest.mark.parametrize(
    ("extra", "yaml", "expected"),
    [
        ({}, None, (Prediction.V, 768)),  # SD 2.1 768 is what most SD 2.x files are
        ({}, 'model:\n  params:\n    parameterization: "v"\n', (Prediction.V, 768)),
        ({}, "model:\n  params:\n    linear_start: 0.00085\n", (Prediction.EPSILON, 512)),
        ({"v_pred": ()}, None, (Prediction.V, 768)),
    ],
)
def test_sd2_prediction_comes_from_a_marker_or_the_sidecar_yaml(
    tmp_path: Path, extra: dict[str, tuple[int, ...]], yaml: str | None, expected: tuple[Any, int]
) -> None:
    keys = {
        UNET_IN: (320, 4, 3, 3),
        VAE_IN: (128, 3, 3, 3),  # complete: see test_incomplete_checkpoints
        "cond_stage_model.model.token_embedding.weight": (8, 4),
    }
    _fake_checkpoint(tmp_path / "sd2.safetensors", {**keys, **extra})
    if yaml is not None:
        (tmp_path / "sd2.yaml").write_text(yaml)
    [model] = list_models(ModelSearchPath(user=(tmp_path,)))
    assert model.architecture is Architecture.SD2
    assert (model.prediction, model.native_size) == expected


def test_pickle_and_truncated_files_are_refused_with_the_reason(
    tmp_path: Path, single_files: dict[Architecture, Path]
) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "old.ckpt").write_bytes(b"PK\x03\x04 never unpickled")
    data = single_files[Architecture.SD1].read_bytes()
    (tmp_path / "cut.safetensors").write_bytes(data[: len(data) // 2])
    (tmp_path / "text.safetensors").write_text("not a model")
    models = {m.name: m for m in list_models(ModelSearchPath(user=(tmp_path,)))}
    assert "unpickling" in models["old"].unsupported_reason
    assert ".safetensors" in models["old"].unsupported_reason  # says how to convert
    assert "truncated" in models["cut"].unsupported_reason
    assert "not a safetensors file" in models["text"].unsupported_reason


def test_a_checkpoint_file_is_found_by_name_and_by_path(
    tmp_path: Path, single_files: dict[Architecture, Path]
) -> None:
    shutil.copy(single_files[Architecture.SDXL], tmp_path / "mine.safetensors")
    search = ModelSearchPath(user=(tmp_path,))
    assert resolve_model("mine", search).architecture is Architecture.SDXL
    direct = resolve_model(str(single_files[Architecture.SD2]), search)
    assert direct.architecture is Architecture.SD2


# Parameter counts of the released models (UNet, VAE, text encoder(s)): the shipped configs
# must describe exactly these networks, or a real checkpoint would not fit them.
RELEASED_SIZES = {
    "sd1": [859_520_964, 83_653_863, 123_060_480],
    "sd2-v": [865_910_724, 83_653_863, 340_387_840],
    "sd2-base": [865_910_724, 83_653_863, 340_387_840],
    "sdxl": [2_567_463_684, 83_653_863, 123_060_480, 694_659_840],
}


@pytest.mark.parametrize("name", list(RELEASED_SIZES))
def test_the_shipped_configs_describe_the_released_networks(name: str) -> None:
    from accelerate import init_empty_weights
    from diffusers import AutoencoderKL, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel, CLIPTextModelWithProjection

    folder = bundled_configs().root / name

    def count(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    with init_empty_weights():  # shapes only: no memory for the weights
        sizes = [
            count(
                UNet2DConditionModel.from_config(UNet2DConditionModel.load_config(folder / "unet"))
            ),
            count(AutoencoderKL.from_config(AutoencoderKL.load_config(folder / "vae"))),
            count(CLIPTextModel(CLIPTextConfig.from_pretrained(folder / "text_encoder"))),
        ]
        if (folder / "text_encoder_2").is_dir():
            config = CLIPTextConfig.from_pretrained(folder / "text_encoder_2")
            sizes.append(count(CLIPTextModelWithProjection(config)))
    assert sizes == RELEASED_SIZES[name]


def test_the_shipped_tokenizers_are_clips() -> None:
    second = shipped_tokenizer(bundled_configs().root / "sdxl" / "tokenizer_2")
    assert second("a photo of a cat").input_ids == [49406, 320, 1125, 539, 320, 2368, 49407]
    assert len(second) == 49408 and second.pad_token == "!" and second.pad_token_id == 0
    first = shipped_tokenizer(bundled_configs().root / "sd1" / "tokenizer")
    assert first.pad_token_id == 49407  # SD 1.x pads with end-of-text
    padded = first("a cat", padding="max_length", max_length=77).input_ids
    assert len(padded) == 77 and padded[-1] == 49407
