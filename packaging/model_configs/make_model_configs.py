"""Regenerate resources/model_configs: what diffusers' single-file loading needs offline.

For each architecture (sd1, sd2-v, sd2-base, sdxl) it writes model_index.json, the scheduler,
UNet, VAE and text encoder configs and the CLIP tokenizer files, so that
`Pipeline.from_single_file(file, config=<folder>, local_files_only=True)` never reaches a
hub. Sources, all offline:
- component configs: the constructor defaults of the installed diffusers/transformers
  classes, overridden by each architecture's published hyperparameters (the table below,
  the values of the reference repositories' config files);
- tokenizer: the CLIP BPE merges `bpe_simple_vocab_16e6.txt.gz` shipped inside the
  open-clip-torch wheel (`pip download open_clip_torch --no-deps`), turned into
  vocab.json + merges.txt exactly as OpenAI's CLIP builds its vocabulary.

Run: `.venv/bin/python packaging/model_configs/make_model_configs.py --bpe <path to .gz or
open_clip_torch wheel>`; it checks the tokenizer against known CLIP token ids.
"""

from __future__ import annotations

import argparse
import gzip
import inspect
import json
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "resources" / "model_configs"
BPE_NAME = "bpe_simple_vocab_16e6.txt.gz"
# One copy of the 2 MB vocabulary for all six tokenizers; each tokenizer folder holds only
# its settings (the padding token differs) and the loader joins them.
SHARED_VOCABULARY = "clip-vocabulary"
# "a photo of a cat" in the real CLIP vocabulary: the check that the vocabulary is right.
KNOWN_IDS = [49406, 320, 1125, 539, 320, 2368, 49407]

SD_SCHEDULER = {
    "beta_start": 0.00085,
    "beta_end": 0.012,
    "beta_schedule": "scaled_linear",
    "num_train_timesteps": 1000,
    "steps_offset": 1,
    "set_alpha_to_one": False,
}
CLIP_L = {
    "vocab_size": 49408,
    "hidden_size": 768,
    "intermediate_size": 3072,
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "max_position_embeddings": 77,
    "hidden_act": "quick_gelu",
    "projection_dim": 768,
}
OPEN_CLIP_H = {  # SD 2.x uses the penultimate layer of OpenCLIP ViT-H: 23 of its 24 layers
    **CLIP_L,
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_attention_heads": 16,
    "num_hidden_layers": 23,
    "hidden_act": "gelu",
    "projection_dim": 512,
}
OPEN_CLIP_BIG_G = {
    **CLIP_L,
    "hidden_size": 1280,
    "intermediate_size": 5120,
    "num_attention_heads": 20,
    "num_hidden_layers": 32,
    "hidden_act": "gelu",
    "projection_dim": 1280,
}
SD_UNET = {
    "sample_size": 64,
    "block_out_channels": [320, 640, 1280, 1280],
    "layers_per_block": 2,
    "cross_attention_dim": 768,
    "attention_head_dim": 8,
    "down_block_types": ["CrossAttnDownBlock2D"] * 3 + ["DownBlock2D"],
    "up_block_types": ["UpBlock2D"] + ["CrossAttnUpBlock2D"] * 3,
}
SD2_UNET = {
    **SD_UNET,
    "cross_attention_dim": 1024,
    "attention_head_dim": [5, 10, 20, 20],
    "use_linear_projection": True,
}
SD_VAE = {
    "block_out_channels": [128, 256, 512, 512],
    "down_block_types": ["DownEncoderBlock2D"] * 4,
    "up_block_types": ["UpDecoderBlock2D"] * 4,
    "latent_channels": 4,
    "layers_per_block": 2,
    "sample_size": 512,
    "scaling_factor": 0.18215,
}

ARCHITECTURES: dict[str, dict[str, Any]] = {
    "sd1": {  # Stable Diffusion 1.5
        "pipeline": "StableDiffusionPipeline",
        "scheduler": ("PNDMScheduler", {**SD_SCHEDULER, "skip_prk_steps": True}),
        "unet": SD_UNET,
        "vae": SD_VAE,
        "text_encoders": {"text_encoder": ("CLIPTextModel", CLIP_L, "<|endoftext|>")},
    },
    "sd2-v": {  # Stable Diffusion 2.1 (768, v-prediction)
        "pipeline": "StableDiffusionPipeline",
        "scheduler": (
            "DDIMScheduler",
            {**SD_SCHEDULER, "clip_sample": False, "prediction_type": "v_prediction"},
        ),
        "unet": {**SD2_UNET, "sample_size": 96, "upcast_attention": True},
        "vae": {**SD_VAE, "sample_size": 768},
        "text_encoders": {"text_encoder": ("CLIPTextModel", OPEN_CLIP_H, "!")},
    },
    "sd2-base": {  # Stable Diffusion 2.1 base (512, epsilon)
        "pipeline": "StableDiffusionPipeline",
        "scheduler": ("PNDMScheduler", {**SD_SCHEDULER, "skip_prk_steps": True}),
        "unet": SD2_UNET,
        "vae": SD_VAE,
        "text_encoders": {"text_encoder": ("CLIPTextModel", OPEN_CLIP_H, "!")},
    },
    "sdxl": {  # Stable Diffusion XL 1.0 base
        "pipeline": "StableDiffusionXLPipeline",
        "scheduler": (
            "EulerDiscreteScheduler",
            {
                **{k: v for k, v in SD_SCHEDULER.items() if k in ("beta_start", "beta_end")},
                "beta_schedule": "scaled_linear",
                "num_train_timesteps": 1000,
                "steps_offset": 1,
                "timestep_spacing": "leading",
            },
        ),
        "unet": {
            "sample_size": 128,
            "block_out_channels": [320, 640, 1280],
            "layers_per_block": 2,
            "cross_attention_dim": 2048,
            "attention_head_dim": [5, 10, 20],
            "transformer_layers_per_block": [1, 2, 10],
            "use_linear_projection": True,
            "addition_embed_type": "text_time",
            "addition_embed_type_num_heads": 64,
            "addition_time_embed_dim": 256,
            "projection_class_embeddings_input_dim": 2816,
            "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
            "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
        },
        "vae": {**SD_VAE, "sample_size": 1024, "scaling_factor": 0.13025, "force_upcast": True},
        "text_encoders": {
            "text_encoder": ("CLIPTextModel", CLIP_L, "<|endoftext|>"),
            "text_encoder_2": ("CLIPTextModelWithProjection", OPEN_CLIP_BIG_G, "!"),
        },
        "index_extra": {"force_zeros_for_empty_prompt": True},
    },
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bpe", type=Path, required=True, help=f"{BPE_NAME} or the wheel")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    vocab, merges = clip_vocabulary(read_bpe(args.bpe))
    write_vocabulary(args.out / SHARED_VOCABULARY, vocab, merges)
    for name, spec in ARCHITECTURES.items():
        folder = args.out / name
        shutil.rmtree(folder, ignore_errors=True)
        write_architecture(folder, spec)
        check_tokenizer(folder)
        print(f"{name}: {folder}")


def read_bpe(path: Path) -> list[str]:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as wheel:
            member = next(n for n in wheel.namelist() if n.endswith(BPE_NAME))
            data = gzip.decompress(wheel.read(member))
    else:
        data = gzip.decompress(path.read_bytes())
    return data.decode("utf-8").split("\n")


def bytes_to_unicode() -> dict[int, str]:
    """CLIP's (and GPT-2's) reversible byte -> printable character table."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return dict(zip(printable, (chr(c) for c in codes), strict=True))


def clip_vocabulary(lines: list[str]) -> tuple[dict[str, int], list[str]]:
    """As `open_clip.tokenizer.SimpleTokenizer`: bytes, bytes + </w>, merges, 2 specials."""
    merges = lines[1 : 49152 - 256 - 2 + 1]
    symbols = list(bytes_to_unicode().values())
    tokens = symbols + [s + "</w>" for s in symbols]
    tokens += ["".join(merge.split()) for merge in merges]
    tokens += ["<|startoftext|>", "<|endoftext|>"]
    return {token: index for index, token in enumerate(tokens)}, merges


def write_architecture(folder: Path, spec: dict[str, Any]) -> None:
    import diffusers

    scheduler_class, scheduler = spec["scheduler"]
    index: dict[str, Any] = {
        "_class_name": spec["pipeline"],
        "_diffusers_version": diffusers.__version__,
        "scheduler": ["diffusers", scheduler_class],
        "unet": ["diffusers", "UNet2DConditionModel"],
        "vae": ["diffusers", "AutoencoderKL"],
        **spec.get("index_extra", {}),
    }
    if spec["pipeline"] == "StableDiffusionPipeline":
        index.update(
            safety_checker=[None, None],
            feature_extractor=[None, None],
            requires_safety_checker=False,
        )
    write_diffusers_config(
        folder / "scheduler" / "scheduler_config.json", scheduler_class, scheduler
    )
    write_diffusers_config(folder / "unet" / "config.json", "UNet2DConditionModel", spec["unet"])
    write_diffusers_config(folder / "vae" / "config.json", "AutoencoderKL", spec["vae"])
    for component, (model_class, text, pad) in spec["text_encoders"].items():
        tokenizer = component.replace("text_encoder", "tokenizer")
        index[component] = ["transformers", model_class]
        index[tokenizer] = ["transformers", "CLIPTokenizer"]
        write_text_config(folder / component, model_class, text)
        write_tokenizer_settings(folder / tokenizer, pad)
    write_json(folder / "model_index.json", index)


def write_diffusers_config(path: Path, class_name: str, overrides: dict[str, Any]) -> None:
    import diffusers

    cls = getattr(diffusers, class_name)
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(cls.__init__).parameters.items()
        if parameter.default is not inspect.Parameter.empty and name != "kwargs"
    }
    unknown = set(overrides) - set(defaults)
    if unknown:
        raise SystemExit(f"{class_name} has no parameters {sorted(unknown)}")
    config = {"_class_name": class_name, "_diffusers_version": diffusers.__version__}
    config.update({k: list(v) if isinstance(v, tuple) else v for k, v in defaults.items()})
    config.update(overrides)
    write_json(path, config)


def write_text_config(folder: Path, model_class: str, values: dict[str, Any]) -> None:
    from transformers import CLIPTextConfig

    config = CLIPTextConfig(**values, bos_token_id=49406, eos_token_id=49407, pad_token_id=1)
    config.architectures = [model_class]
    folder.mkdir(parents=True, exist_ok=True)
    config.save_pretrained(folder)


def write_vocabulary(folder: Path, vocab: dict[str, int], merges: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8"
    )


def write_tokenizer_settings(folder: Path, pad: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    specials = {
        "bos_token": "<|startoftext|>",
        "eos_token": "<|endoftext|>",
        "unk_token": "<|endoftext|>",
        "pad_token": pad,  # SD 1.x pads with end-of-text, OpenCLIP-based encoders with "!"
    }
    write_json(folder / "special_tokens_map.json", specials)
    write_json(
        folder / "tokenizer_config.json",
        {
            **specials,
            "tokenizer_class": "CLIPTokenizer",
            "model_max_length": 77,
            "do_lower_case": True,
            "errors": "replace",
            "add_prefix_space": False,
            "clean_up_tokenization_spaces": True,
        },
    )


def check_tokenizer(folder: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from app.engine.generation.load.pipelines import shipped_tokenizer

    for sub in sorted(folder.glob("tokenizer*")):
        ids = shipped_tokenizer(sub)("a photo of a cat").input_ids
        if ids != KNOWN_IDS:
            raise SystemExit(f"{sub}: 'a photo of a cat' -> {ids}, expected {KNOWN_IDS}")


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
