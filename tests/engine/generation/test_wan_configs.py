"""The shipped Wan config folders (resources/model_configs/wan*, written by
packaging/model_configs/make_wan_configs.py from diffusers' convert_wan_to_diffusers.py):
each builds the released networks (parameter counts that agree with the released files'
sizes), and a transformer of each release's shapes, in Wan-AI's keys, picks its own folder.

Built on the meta device: no memory, a second for all of them.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest

from app.engine.generation.families.wan.files import config_for, read_header
from app.engine.generation.files.transformer_files import FileNeeds
from app.engine.generation.load.pipelines import bundled_configs
from tests.engine.generation.tiny_wan_files import wan_transformer_to_original

# Parameters of each release's transformer and VAE (the released fp16 files hold two bytes
# each: 2.84 GB for 1.3B, 28.6 GB for 14B, 32.8 GB for I2V 14B, 10.0 GB for TI2V 5B; the
# fp32 VAEs 0.51 GB and 2.82 GB).
RELEASES = {
    "wan2.1-t2v-1.3b": ("WanPipeline", 1_418_996_800, 126_892_531),
    "wan2.1-t2v-14b": ("WanPipeline", 14_288_491_584, 126_892_531),
    "wan2.1-i2v-14b-480p": ("WanImageToVideoPipeline", 16_394_878_784, 126_892_531),
    "wan2.1-i2v-14b-720p": ("WanImageToVideoPipeline", 16_394_878_784, 126_892_531),
    "wan2.2-ti2v-5b": ("WanPipeline", 4_999_787_712, 704_688_668),
    "wan2.2-t2v-a14b": ("WanPipeline", 14_288_491_584, 126_892_531),
    "wan2.2-i2v-a14b": ("WanImageToVideoPipeline", 14_288_901_184, 126_892_531),
}
# Each model index's own settings, as the conversion script's __main__ passes them.
PIPELINE_SETTINGS = {
    "wan2.2-ti2v-5b": {"expand_timesteps": True},
    "wan2.2-t2v-a14b": {"boundary_ratio": 0.875},
    "wan2.2-i2v-a14b": {"boundary_ratio": 0.9},
}
# ComfyUI's names of the released files (Comfy-Org's repackaged split files).
FILE_NAMES = {
    "wan2.1-t2v-1.3b": "wan2.1_t2v_1.3B_fp16",
    "wan2.1-t2v-14b": "wan2.1_t2v_14B_fp16",
    "wan2.1-i2v-14b-480p": "wan2.1_i2v_480p_14B_fp16",
    "wan2.1-i2v-14b-720p": "wan2.1_i2v_720p_14B_fp16",
    "wan2.2-ti2v-5b": "wan2.2_ti2v_5B_fp16",
    "wan2.2-i2v-a14b": "wan2.2_i2v_high_noise_14B_fp16",
}
UMT5_XXL_PARAMETERS = 5_680_910_336  # umt5_xxl_fp16.safetensors: 11.4 GB, the embedding once


def _folder(name: str) -> Path:
    return bundled_configs().root / name


def _config(name: str, component: str) -> dict[str, Any]:
    return json.loads((_folder(name) / component / "config.json").read_text(encoding="utf-8"))


def _on_meta(cls: Any, config: dict[str, Any]) -> Any:
    """The network of `config`, built once (the releases share five transformers, two VAEs)."""
    return _built(cls.__name__, json.dumps(config, sort_keys=True))


@functools.cache
def _built(class_name: str, config: str) -> Any:
    import diffusers
    from accelerate import init_empty_weights

    with init_empty_weights():
        return getattr(diffusers, class_name).from_config(json.loads(config))


def _count(model: Any) -> int:
    return sum(p.numel() for p in model.parameters())


def _shapes(transformer: Any) -> dict[str, list[int]]:
    """The transformer's weights in Wan-AI's keys, as a file's header gives their shapes."""
    return {
        key.replace("condition_embedder.image_embedder.", "img_emb."): list(value.shape)
        for key, value in wan_transformer_to_original(transformer.state_dict()).items()
    }


@pytest.mark.parametrize("name", sorted(RELEASES))
def test_each_shipped_folder_builds_the_released_networks(name: str) -> None:
    import diffusers

    pipeline, transformer_count, vae_count = RELEASES[name]
    index = json.loads((_folder(name) / "model_index.json").read_text(encoding="utf-8"))
    assert index["_class_name"] == pipeline
    settings = {k: index[k] for k in ("boundary_ratio", "expand_timesteps") if k in index}
    assert settings == PIPELINE_SETTINGS.get(name, {})
    experts = ["transformer_2"] if "boundary_ratio" in settings else []
    for component in ["transformer", *experts]:
        config = _config(name, component)
        assert _count(_on_meta(diffusers.WanTransformer3DModel, config)) == transformer_count
    assert _count(_on_meta(diffusers.AutoencoderKLWan, _config(name, "vae"))) == vae_count
    scheduler = diffusers.UniPCMultistepScheduler.from_pretrained(_folder(name) / "scheduler")
    assert scheduler.config.flow_shift == (5.0 if name == "wan2.2-ti2v-5b" else 3.0)
    assert scheduler.config.prediction_type == "flow_prediction"


def test_the_shipped_umt5_is_umt5_xxl() -> None:
    from accelerate import init_empty_weights
    from transformers import UMT5Config, UMT5EncoderModel

    config = UMT5Config.from_pretrained(_folder("wan2.1-t2v-1.3b") / "text_encoder")
    with init_empty_weights():
        encoder = UMT5EncoderModel(config)
    weights = {n: p.numel() for n, p in encoder.named_parameters() if "embed_tokens" not in n}
    assert sum(weights.values()) == UMT5_XXL_PARAMETERS and config.vocab_size == 256_384


@pytest.mark.parametrize("name", sorted(FILE_NAMES))
def test_a_transformer_of_each_release_s_shapes_picks_its_folder(name: str) -> None:
    import diffusers

    transformer = _on_meta(diffusers.WanTransformer3DModel, _config(name, "transformer"))
    bare = _shapes(transformer)
    assert config_for(bare, FILE_NAMES[name]) == name
    needs = read_header(bare, FILE_NAMES[name])
    assert isinstance(needs, FileNeeds) and needs.config_name == name
    latents = 48 if name == "wan2.2-ti2v-5b" else 16  # the VAE it pairs with
    assert needs.widths == {"umt5": 4096, "wan_vae": latents}


def test_a_wan_2_2_t2v_expert_file_has_wan_2_1_14b_s_shapes() -> None:
    """Wan 2.2 T2V A14B's experts are 2.1 14B's network: one alone reads as it (its pair
    is for expert files, elsewhere)."""
    import diffusers

    expert = _on_meta(diffusers.WanTransformer3DModel, _config("wan2.2-t2v-a14b", "transformer"))
    assert config_for(_shapes(expert), "wan2.2_t2v_high_noise_14B_fp16") == "wan2.1-t2v-14b"
