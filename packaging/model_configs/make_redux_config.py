"""Write the offline config of Flux.1 Redux for ComfyUI's file to
resources/model_configs/flux1-redux-dev/: what black-forest-labs/FLUX.1-Redux-dev's folder
holds besides its weights, so `style_models/flux1-redux-dev.safetensors` and its SigLIP in
`clip_vision/` load without a hub (guidance/redux_models.py, families/flux/redux.py).

Sources, offline: the SigLIP vision tower is google/siglip-so400m-patch14-384's (27 layers,
1152 wide, 16 heads, MLP 4304, 14-pixel patches of 384x384: its published config, and the
shapes of ComfyUI's sigclip_vision_patch14_384.safetensors); its image processor SigLIP's
(384x384 bicubic, mean and standard deviation 0.5); the projection diffusers'
`ReduxImageEncoder` (SigLIP's 1152 -> T5-XXL's 4096).

Run: `PYTHONPATH=. .venv/bin/python packaging/model_configs/make_redux_config.py`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[2] / "resources" / "model_configs" / "flux1-redux-dev"

SIGLIP_SO400M: dict[str, Any] = {
    "hidden_size": 1152,
    "intermediate_size": 4304,
    "num_hidden_layers": 27,
    "num_attention_heads": 16,
    "image_size": 384,
    "patch_size": 14,
    "hidden_act": "gelu_pytorch_tanh",
    "layer_norm_eps": 1e-06,
}
PROCESSOR: dict[str, Any] = {
    "image_processor_type": "SiglipImageProcessor",
    "processor_class": "SiglipProcessor",
    "do_resize": True,
    "size": {"height": 384, "width": 384},
    "resample": 3,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.5, 0.5, 0.5],
    "image_std": [0.5, 0.5, 0.5],
}
INDEX: dict[str, Any] = {
    "_class_name": "FluxPriorReduxPipeline",
    "feature_extractor": ["transformers", "SiglipImageProcessor"],
    "image_embedder": ["diffusers", "ReduxImageEncoder"],
    "image_encoder": ["transformers", "SiglipVisionModel"],
}


def main() -> None:
    import diffusers
    from diffusers.pipelines.flux.modeling_flux import ReduxImageEncoder
    from transformers import SiglipVisionConfig

    write_json(OUT / "model_index.json", {**INDEX, "_diffusers_version": diffusers.__version__})
    config = SiglipVisionConfig(**SIGLIP_SO400M)
    config.architectures = ["SiglipVisionModel"]
    config.save_pretrained(OUT / "image_encoder")
    write_json(OUT / "feature_extractor" / "preprocessor_config.json", PROCESSOR)
    embedder: Any = ReduxImageEncoder(redux_dim=1152, txt_in_features=4096)
    embedder.save_config(OUT / "image_embedder")


def write_json(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
