"""Write the offline configs of Qwen-Image, Qwen-Image-Edit and Edit Plus (2509, 2511) to
resources/model_configs/, so Easel assembles their pipelines from ComfyUI's split files
without a hub: model_index.json, the transformer's, VAE's, scheduler's and Qwen2.5-VL's
configs, and an Edit model's image processor settings. No tokenizer: Qwen2.5's vocabulary
is found beside the files or in the Hugging Face cache (families/qwen/files.py).

Sources, all offline:
- the transformer and VAE: the constructor defaults of diffusers' `QwenImageTransformer2DModel`
  and `AutoencoderKLQwenImage` (they are Qwen/Qwen-Image's released configs: 60 layers,
  24 heads of 128, text width 3584; the VAE's per-channel latent statistics), Edit 2511's
  transformer with `zero_cond_t` (its release's one difference);
- the scheduler: Qwen/Qwen-Image's scheduler_config.json (app/testing/tiny/qwen.py keeps it);
- the text encoder: Qwen/Qwen2.5-VL-7B-Instruct's published config.json (below);
- the processor: Qwen2.5-VL's image settings as Qwen/Qwen-Image-Edit's `processor/` and
  ComfyUI's `process_qwen2vl_images` state them (14-pixel patches merged 2x2, 3,136 to
  12,845,056 pixels, OpenAI CLIP's mean and standard deviation).

Run: `PYTHONPATH=. .venv/bin/python packaging/model_configs/make_qwen_configs.py`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "resources" / "model_configs"

QWEN25_VL_7B: dict[str, Any] = {  # Qwen/Qwen2.5-VL-7B-Instruct, config.json
    "architectures": ["Qwen2_5_VLForConditionalGeneration"],
    "text_config": {
        "vocab_size": 152064,
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "hidden_act": "silu",
        "max_position_embeddings": 128000,
        "rms_norm_eps": 1e-06,
        "use_sliding_window": False,
        "sliding_window": 32768,
        "max_window_layers": 28,
        "attention_dropout": 0.0,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": 1000000.0,
            "mrope_section": [16, 24, 24],
        },
        "bos_token_id": 151643,
        "eos_token_id": 151645,
        "tie_word_embeddings": False,
    },
    "vision_config": {
        "depth": 32,
        "hidden_act": "silu",
        "hidden_size": 1280,
        "intermediate_size": 3420,
        "num_heads": 16,
        "in_chans": 3,
        "out_hidden_size": 3584,
        "patch_size": 14,
        "spatial_merge_size": 2,
        "temporal_patch_size": 2,
        "window_size": 112,
        "fullatt_block_indexes": [7, 15, 23, 31],
        "tokens_per_second": 2,
    },
    "image_token_id": 151655,
    "video_token_id": 151656,
    "vision_start_token_id": 151652,
    "vision_end_token_id": 151653,
    "tie_word_embeddings": False,
}
PROCESSOR: dict[str, Any] = {  # Qwen/Qwen-Image-Edit, processor/preprocessor_config.json
    "image_processor_type": "Qwen2VLImageProcessor",
    "processor_class": "Qwen2VLProcessor",
    "do_resize": True,
    "do_rescale": True,
    "do_normalize": True,
    "do_convert_rgb": True,
    "rescale_factor": 1 / 255,
    "image_mean": [0.48145466, 0.4578275, 0.40821073],
    "image_std": [0.26862954, 0.26130258, 0.27577711],
    "min_pixels": 3136,
    "max_pixels": 12845056,
    "size": {"shortest_edge": 3136, "longest_edge": 12845056},
    "patch_size": 14,
    "temporal_patch_size": 2,
    "merge_size": 2,
}
RELEASES = {  # config folder -> (pipeline class, transformer settings beyond the defaults)
    "qwen-image": ("QwenImagePipeline", {}),
    "qwen-image-edit": ("QwenImageEditPipeline", {}),
    "qwen-image-edit-2509": ("QwenImageEditPlusPipeline", {}),
    "qwen-image-edit-2511": ("QwenImageEditPlusPipeline", {"zero_cond_t": True}),
}


def main() -> None:
    for name, (pipeline, transformer) in RELEASES.items():
        write_release(OUT / name, pipeline, transformer)
        print(f"wrote {OUT / name}", file=sys.stderr)


def write_release(folder: Path, pipeline: str, transformer: dict[str, Any]) -> None:
    import diffusers
    from diffusers import (
        AutoencoderKLQwenImage,
        FlowMatchEulerDiscreteScheduler,
        QwenImageTransformer2DModel,
    )
    from transformers import Qwen2_5_VLConfig

    from app.testing.tiny.qwen import QWEN_SCHEDULER

    edit = "Edit" in pipeline
    index: dict[str, Any] = {
        "_class_name": pipeline,
        "_diffusers_version": diffusers.__version__,
        "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
        "text_encoder": ["transformers", "Qwen2_5_VLForConditionalGeneration"],
        "tokenizer": ["transformers", "Qwen2Tokenizer"],
        "transformer": ["diffusers", "QwenImageTransformer2DModel"],
        "vae": ["diffusers", "AutoencoderKLQwenImage"],
    }
    if edit:
        index["processor"] = ["transformers", "Qwen2VLProcessor"]
    write_json(folder / "model_index.json", dict(sorted(index.items())))
    with torch.device("meta"):  # the configs only: no memory for 20B weights
        made: list[tuple[Any, str]] = [
            (QwenImageTransformer2DModel(**transformer), "transformer"),
            (AutoencoderKLQwenImage(), "vae"),
        ]
    made.append((FlowMatchEulerDiscreteScheduler(**QWEN_SCHEDULER), "scheduler"))
    for component, subfolder in made:  # diffusers' ConfigMixin, untyped
        component.save_config(folder / subfolder)
    settings = Qwen2_5_VLConfig(**QWEN25_VL_7B)
    settings.dtype = torch.bfloat16
    settings.save_pretrained(folder / "text_encoder")
    if edit:
        write_json(folder / "processor" / "preprocessor_config.json", PROCESSOR)


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
