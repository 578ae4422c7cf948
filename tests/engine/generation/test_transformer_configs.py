"""The shipped configs of Flux.1, Flux.1 Kontext, Chroma, SD 3.5 and Qwen-Image describe the
released networks, and the shipped T5 vocabulary is the real one."""

from __future__ import annotations

import json

import pytest
import torch

from app.engine.generation.load.pipelines import (
    bundled_configs,
    shipped_t5_tokenizer,
    shipped_tokenizer,
)

# Parameter counts of the released models: [transformer, VAE, CLIP-L, (CLIP-G,) T5-XXL].
# - Flux.1 transformers: the `total_size` of the reference repositories'
#   transformer/diffusion_pytorch_model.safetensors.index.json (bfloat16, 2 bytes each):
#   dev 23,802,816,640 B = 11,901,408,320; schnell 23,782,357,120 B = 11,891,178,560
#   (black-forest-labs/FLUX.1-dev and -schnell; the model card says "12 billion").
# - SD 3.5 large: 16,292,561,536 B = 8,146,280,768 values, of which 192 x 192 x 2432 =
#   89,653,248 are the positional embedding (a buffer in diffusers, not a parameter):
#   8,056,627,520 parameters (the model card's "8.1 billion" counts the buffer).
# - SD 3.5 medium (MMDiT-X): 2,243,171,520 parameters + 384 x 384 x 1536 = 226,492,416
#   positional values = 2,469,663,936 ("2.5 billion" on the model card, "2.47B params" on
#   its GGUF conversions' cards).
# - T5-XXL encoder: text_encoder_2/model.safetensors.index.json of FLUX.1-dev, and
#   text_encoder_3 of stable-diffusion-3.5-large: 9,524,621,312 B = 4,762,310,656.
# - CLIP ViT-L (123,060,480; with its projection 123,650,304) and OpenCLIP ViT-bigG with
#   projection (694,659,840) as SDXL's (test_single_file.py); the 16-channel VAE 83,819,683
#   (its 167.6 MB float16 diffusion_pytorch_model.safetensors).
T5_XXL = 4_762_310_656
VAE_16 = 83_819_683
RELEASED_SIZES = {
    "flux1-dev": [11_901_408_320, VAE_16, 123_060_480, T5_XXL],
    "flux1-schnell": [11_891_178_560, VAE_16, 123_060_480, T5_XXL],
    "sd3.5-medium": [2_243_171_520, VAE_16, 123_650_304, 694_659_840, T5_XXL],
    "sd3.5-large": [8_056_627_520, VAE_16, 123_650_304, 694_659_840, T5_XXL],
    "sd3.5-large-turbo": [8_056_627_520, VAE_16, 123_650_304, 694_659_840, T5_XXL],
    # FLUX.1-Kontext-dev: Flux.1 dev's network, trained further (the same shapes).
    "flux1-kontext-dev": [11_901_408_320, VAE_16, 123_060_480, T5_XXL],
    # Chroma1-HD: "8.9B parameters" on its model card (no CLIP, no guidance embedder, no
    # per-block modulation; its approximator 64 -> 5120, 5 layers deep); T5-XXL alone.
    "chroma": [8_899_983_424, VAE_16, T5_XXL],
    # Qwen-Image: the 20B MMDiT (Qwen/Qwen-Image's transformer index: 40,860,802,176 B in
    # bfloat16), its VAE (Wan 2.1's layout) and Qwen2.5-VL-7B-Instruct ("8.29B params", its
    # head untied); Edit and Edit Plus are the same networks (2511's with `zero_cond_t`,
    # no weights of its own; the other edit configs are written by the same code).
    "qwen-image": [20_430_401_088, 126_892_531, 8_292_166_656],
    "qwen-image-edit-2511": [20_430_401_088, 126_892_531, 8_292_166_656],
}


@pytest.mark.parametrize("name", list(RELEASED_SIZES))
def test_the_shipped_configs_describe_the_released_networks(name: str) -> None:
    import diffusers
    import transformers

    folder = bundled_configs().root / name
    index = json.loads((folder / "model_index.json").read_text())

    def count(module: torch.nn.Module) -> int:
        return sum(p.numel() for p in module.parameters())

    def build(component: str) -> torch.nn.Module:
        library, class_name = index[component]
        cls = getattr(diffusers if library == "diffusers" else transformers, class_name)
        if library == "diffusers":
            return cls.from_config(cls.load_config(folder / component))
        return cls(cls.config_class.from_pretrained(folder / component))

    components = ["transformer", "vae", "text_encoder", "text_encoder_2", "text_encoder_3"]
    # Shapes only, no memory for the weights (accelerate's init_empty_weights would untie
    # T5's embedding from `shared` and count it twice).
    with torch.device("meta"):
        sizes = [count(build(c)) for c in components if c in index]
    assert sizes == RELEASED_SIZES[name]


def test_the_shipped_t5_vocabulary_is_t5s() -> None:
    root = bundled_configs().root
    flux = shipped_t5_tokenizer(root / "flux1-dev" / "tokenizer_2")
    assert len(flux) == 32100 and flux.model_max_length == 512
    assert flux("Hello world").input_ids == [8774, 296, 1]
    padded = flux("a cat", padding="max_length", max_length=8).input_ids
    assert padded == [3, 9, 1712, 1, 0, 0, 0, 0]  # "</s>" then "<pad>" (id 0), as T5's own
    sd3 = shipped_t5_tokenizer(root / "sd3.5-large" / "tokenizer_3")
    assert sd3.model_max_length == 256 and sd3("Hello world").input_ids == [8774, 296, 1]


def test_the_sd3_clip_tokenizers_pad_as_released() -> None:
    root = bundled_configs().root / "sd3.5-medium"
    assert shipped_tokenizer(root / "tokenizer").pad_token == "<|endoftext|>"
    assert shipped_tokenizer(root / "tokenizer_2").pad_token == "!"  # OpenCLIP's padding
