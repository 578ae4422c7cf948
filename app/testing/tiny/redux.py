"""A tiny random Flux.1 Redux folder (`FluxPriorReduxPipeline`'s parts), for tests and
benchmarks: a SigLIP vision encoder of one layer on 16x16 pictures (4 patches: 4 image
tokens), its image processor (16x16, SigLIP's normalisation; the PIL backend, as
transformers builds it without torchvision) and a `ReduxImageEncoder` projecting its width
into the tiny Flux's T5 width (`tiny.flux.T5_WIDTH`). Saved as black-forest-labs/
FLUX.1-Redux-dev is laid out, it loads from disk alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from app.testing.tiny.flux import T5_WIDTH

SIGLIP_WIDTH = 8  # the tiny SigLIP's hidden size: the Redux embedder's redux_dim
PICTURE = 16  # pixels per side the processor resizes to
PATCH = 8  # 2 x 2 patches: 4 image tokens


def build_tiny_redux(seed: int = 0) -> dict[str, Any]:
    """The three parts, by their folder names."""
    import torch
    from diffusers.pipelines.flux.modeling_flux import ReduxImageEncoder
    from transformers import SiglipImageProcessor, SiglipVisionConfig, SiglipVisionModel

    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        encoder = SiglipVisionModel(
            SiglipVisionConfig(
                hidden_size=SIGLIP_WIDTH, intermediate_size=16, num_hidden_layers=1,
                num_attention_heads=2, image_size=PICTURE, patch_size=PATCH,
            )
        )  # fmt: skip
        embedder = ReduxImageEncoder(redux_dim=SIGLIP_WIDTH, txt_in_features=T5_WIDTH)
    processor = SiglipImageProcessor(size={"height": PICTURE, "width": PICTURE})
    return {
        "image_encoder": encoder.eval(),
        "feature_extractor": processor,
        "image_embedder": embedder.eval(),
    }


def write_tiny_redux(folder: Path, seed: int = 0) -> Path:
    """A FLUX.1-Redux-dev-shaped folder at `folder` (with its model_index.json)."""
    parts = build_tiny_redux(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for name, part in parts.items():
        part.save_pretrained(folder / name)
    index = {
        "_class_name": "FluxPriorReduxPipeline",
        "_diffusers_version": "0.32.0.dev0",
        "feature_extractor": ["transformers", "SiglipImageProcessor"],
        "image_embedder": ["diffusers", "ReduxImageEncoder"],
        "image_encoder": ["transformers", "SiglipVisionModel"],
    }
    (folder / "model_index.json").write_text(json.dumps(index, indent=2))
    return folder


def stock_redux_flux(
    flux: Path, redux: Path, params: Any, pictures: list[Any], dtype: Any = None
) -> Any:
    """The stock image of a Flux.1 job `params` with its reference `pictures` (PIL) through
    the Redux folder `redux`: diffusers' documented pair, the prior given the base pipeline's
    text encoders (its prompt-weighting call: each reference's weight its per-image
    `prompt_embeds_scale` and `pooled_prompt_embeds_scale`), then `FluxPipeline(
    guidance_scale=..., **pipe_prior_output)`, both in `dtype` (None: float32)."""
    import torch
    from diffusers import FluxPipeline, FluxPriorReduxPipeline

    dtype = dtype or torch.float32
    pipe: Any = FluxPipeline.from_pretrained(flux, dtype=dtype, local_files_only=True)
    parts: Any = FluxPriorReduxPipeline.from_pretrained(redux, dtype=dtype, local_files_only=True)
    prior: Any = FluxPriorReduxPipeline(
        image_encoder=parts.image_encoder, feature_extractor=parts.feature_extractor,
        image_embedder=parts.image_embedder, text_encoder=pipe.text_encoder,
        tokenizer=pipe.tokenizer, text_encoder_2=pipe.text_encoder_2,
        tokenizer_2=pipe.tokenizer_2,
    )  # fmt: skip
    for each in (pipe, prior):
        each.set_progress_bar_config(disable=True)
    weights = [float(reference.weight) for reference in params.references]
    pipe_prior_output = prior(
        pictures, prompt=params.prompt, prompt_embeds_scale=weights,
        pooled_prompt_embeds_scale=weights,
    )  # fmt: skip
    return pipe(
        guidance_scale=params.cfg, num_inference_steps=params.steps, height=params.height,
        width=params.width, generator=torch.Generator("cpu").manual_seed(params.seed),
        **pipe_prior_output,
    ).images[0]  # fmt: skip


REDUX_FILE = "flux1-redux-dev"  # ComfyUI's name of the released file (style_models/)
SIGLIP_FILE = "sigclip_vision_patch14_384.safetensors"  # ... and of its SigLIP (clip_vision/)


def write_tiny_redux_files(root: Path, seed: int = 0) -> Path:
    """The tiny Redux of `seed` as ComfyUI's files in the models folder `root`: the
    projection as `style_models/flux1-redux-dev.safetensors`, the SigLIP as
    `clip_vision/sigclip_vision_patch14_384.safetensors` in the released files' keys
    (`vision_model.`, which transformers 5's model drops), and the config folder they load
    with, `root/configs` (the folder's, without weights: the shipped flux1-redux-dev is the
    released folder's). Returns the config folder."""
    from safetensors.torch import save_file

    parts = build_tiny_redux(seed)
    (root / "style_models").mkdir(parents=True, exist_ok=True)
    embedder = parts["image_embedder"].state_dict()
    save_file(embedder, str(root / "style_models" / f"{REDUX_FILE}.safetensors"))
    (root / "clip_vision").mkdir(exist_ok=True)
    siglip = {"vision_model." + k: v for k, v in parts["image_encoder"].state_dict().items()}
    save_file(siglip, str(root / "clip_vision" / SIGLIP_FILE))
    configs = write_tiny_redux(root / "configs", seed)
    for weights in configs.rglob("*.safetensors"):
        weights.unlink()
    return configs
