"""LTX-Video (0.9.x), text to video and image to video: a 3D DiT on 1x1x1 patches of
128-channel latents, the T5 v1.1 XXL text encoder, a VAE compressing 32x in space and 8x in
time; `model.py` drives it as `LTXPipeline` does, and with an input image (the job's init
image) as `LTXImageToVideoPipeline` does (the same folder, the same components). Its
diffusers folders, and Lightricks' all-in-one files (transformer and VAE) beside a T5-XXL,
or a GGUF of the transformer beside an LTX-Video VAE file (`files.py`)."""

from __future__ import annotations

from dataclasses import replace

from app.engine.generation.families.ltx import files
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    Requests,
    TransformerFile,
    VideoRequests,
)
from app.engine.generation.files.transformer_files import LTX_VAE, T5

LTX_VIDEO_ID = Architecture.declare("ltx-video", released="2024-11")

LTX_SIZE_MULTIPLE = 32  # the VAE's spatial compression (the stock check_inputs says 32)
LTX_SAMPLERS = ("Euler",)  # the flow-matching Euler the released folders ship

# Diffusers converts Lightricks' keys itself (single_file_utils.convert_ltx_*).
LTX_TRANSFORMER_FILE = TransformerFile(
    markers=("patchify_proj.", "adaln_single."),
    split_parts=(T5, LTX_VAE),
    read_header=files.read_header,
    transformer_class="LTXVideoTransformer3DModel",
    components=((T5, "text_encoder"),),
    read_vae=files.read_vae,
)

LTX_VIDEO = FamilySpec(
    architecture=LTX_VIDEO_ID,
    label="LTX-Video",
    transformer=True,
    native_size=704,  # the stock pipeline's default 704x512
    folder=Folder(
        pipelines=("LTXPipeline", "LTXImageToVideoPipeline"),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="LTXPipeline",
    driven_pipelines=("LTXPipeline",),
    driver="app.engine.generation.families.ltx.model:LTXVideoFamily",
    checkpoint_family="ltx-video",
    checkpoint_label="LTX-Video",
    requests=Requests(
        samplers=LTX_SAMPLERS,
        size_multiple=LTX_SIZE_MULTIPLE,
        img2img=True,  # a video job's init image: the clip's first frame (image to video)
        reference_images=False,
    ),
    float16_overflowing_encoders=("text_encoder",),  # T5 v1.1 XXL
    # Both stock pipelines run First Block Cache in one "cond_uncond" context, as `model.py`
    # does (tests/engine/generation/test_step_cache_ltx.py: equal to stock with the hook).
    step_cache=True,
    preview="app.engine.generation.families.ltx.model:LTXVideoPreviewer",
    # Its VAE packs 8 frames into each latent frame after the first: 8k+1 frames; the stock
    # pipeline's default clip is 161 frames at 25 a second. An input image is optional.
    video=VideoRequests(frame_step=8, default_frames=161, default_fps=25, takes_image=True),
    transformer_file=LTX_TRANSFORMER_FILE,
)

LTX_CONDITION_ID = Architecture.declare("ltx-condition", released="2025-03")

# LTX-Video 0.9.5 on (0.9.5, 0.9.7, 0.9.8): their folders say `LTXConditionPipeline`, which
# draws text to video or from conditioning frames (an image at frame 0), the same
# components as 0.9.0's (`condition.py`). Their single files are LTX-Video's, detected by
# their VAE (files.py), and assembled by this declaration (never claiming a file itself).
LTX_CONDITION = replace(
    LTX_VIDEO,
    architecture=LTX_CONDITION_ID,
    label="LTX-Video 0.9.5+",
    folder=Folder(
        pipelines=("LTXConditionPipeline",),
        parts=("transformer", "vae", "scheduler", "text_encoder", "tokenizer"),
    ),
    pipeline="LTXConditionPipeline",
    driven_pipelines=("LTXConditionPipeline",),
    driver="app.engine.generation.families.ltx.condition:LTXConditionFamily",
    checkpoint_family="ltx-condition",
    checkpoint_label="LTX-Video 0.9.5+",
    # The stock `timesteps=`: its distilled releases' own list (prompts/few_step.py).
    requests=replace(LTX_VIDEO.requests, timesteps=True),
    preview="app.engine.generation.families.ltx.condition:LTXConditionPreviewer",
    # An image at frame 0 (the init image), and a last frame beside it (a job's last image),
    # each at a strength of the job's (the last image at a frame of the job's too).
    video=VideoRequests(
        frame_step=8,
        default_frames=161,
        default_fps=25,
        takes_image=True,
        takes_last_image=True,
        weighs_images=True,
    ),
    transformer_file=replace(LTX_TRANSFORMER_FILE, claims=files.never_claims),
)

FAMILIES = (LTX_VIDEO, LTX_CONDITION)
