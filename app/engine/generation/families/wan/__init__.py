"""Wan: a 3D DiT on (1, 2, 2) patches, the UMT5 text encoder, the Wan VAE (4x in time).
Three families, told apart by their folders' configs (Wan 2.1 text to video also as
ComfyUI's split files and city96's GGUFs: `files.py`):
- Wan 2.1 text to video (1.3B and 14B; a folder with two experts, Wan 2.2 A14B's shape,
  runs as it): `WanPipeline`, driven by `model.py`;
- Wan 2.2 TI2V 5B, text or text and an image: a `WanPipeline` folder whose model index
  says `expand_timesteps` (a timestep per latent patch), its VAE 16x in space with 48
  channels; loaded as `WanImageToVideoPipeline` (as its model card does for an image),
  driven by `image.py`: an input image is its first latent frame, at timestep 0;
- Wan 2.1 image to video (14B 480p and 720p): `WanImageToVideoPipeline` with the CLIP
  image encoder; the input image's latents and mask ride beside the noise (`image.py`);
- Wan 2.2 I2V A14B: two experts of Wan 2.1 I2V's shape without CLIP (a folder, or two
  expert files paired by name: files/expert_files.py), driven as Wan 2.1 I2V (its
  checkpoints are that driver's); stock `WanImageToVideoPipeline` takes a last image
  beside the first on it, and so does Easel;
- Wan 2.1 first-and-last-frame (FLF2V 14B 720p): Wan 2.1 I2V's shape whose transformer
  reads CLIP's states of two images (`pos_embed_seq_len`): a first and a last frame.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.engine.generation.families.wan import clip_vision, files, umt5
from app.engine.generation.files.registry import (
    Architecture,
    FamilySpec,
    Folder,
    FolderConfigs,
    Requests,
    TransformerFile,
    VideoRequests,
)
from app.engine.generation.files.transformer_files import UMT5, WAN_VAE

WAN21_ID = Architecture.declare("wan2.1", released="2025-02")
WAN21_I2V_ID = Architecture.declare("wan2.1-i2v", released="2025-02")
WAN22_TI2V_ID = Architecture.declare("wan2.2-ti2v", released="2025-07")
WAN21_FLF2V_ID = Architecture.declare("wan2.1-flf2v", released="2025-04")
WAN22_I2V_ID = Architecture.declare("wan2.2-i2v", released="2025-07")

WAN_SIZE_MULTIPLE = 16  # the VAE's 8 times the transformer's 2x2 spatial patches
# UniPC first: the released folders' own scheduler (the stock pipeline's default there);
# Euler: the flow-matching Euler of the other flow families, with the folder's shift.
WAN_SAMPLERS = ("UniPC", "Euler")

WAN_PARTS = ("transformer", "vae", "scheduler", "text_encoder", "tokenizer")
IMAGE_DRIVERS = "app.engine.generation.families.wan.image:Wan{}Family"  # I2v, Ti2v


def expands_timesteps(configs: FolderConfigs) -> bool:
    """Whether a Wan folder is Wan 2.2 TI2V's: its model index's `expand_timesteps` (a
    timestep per latent patch, what lets the first frame be an input image's)."""
    index: Any = configs.get("model_index.json", {})
    return bool(index.get("expand_timesteps", False))


def _has_clip(configs: FolderConfigs) -> bool:
    index: Any = configs.get("model_index.json", {})
    return index.get("image_encoder") not in (None, [None, None])


def has_i2v_experts(configs: FolderConfigs) -> bool:
    """Whether a `WanImageToVideoPipeline` folder is Wan 2.2 I2V A14B's: two experts
    (`boundary_ratio`) and no CLIP image encoder, not TI2V's."""
    index: Any = configs.get("model_index.json", {})
    experts = index.get("boundary_ratio") is not None
    return experts and not _has_clip(configs) and not expands_timesteps(configs)


def reads_images(configs: FolderConfigs) -> bool:
    """Whether a `WanImageToVideoPipeline` folder is Wan 2.1 I2V's (or FLF2V's): not TI2V's,
    with its CLIP image encoder (14B 480p/720p)."""
    return not expands_timesteps(configs) and _has_clip(configs)


def reads_two_images(configs: FolderConfigs) -> bool:
    """Whether a Wan 2.1 I2V folder is FLF2V's: its transformer's image embedding has
    positions for two images' CLIP states (`pos_embed_seq_len`: 257 tokens each)."""
    transformer: Any = configs.get("transformer", {})
    return reads_images(configs) and transformer.get("pos_embed_seq_len") is not None


def read_by_wan21(_keys: list[str], _name: str) -> bool:
    """Never: the Wan image families' files share Wan 2.1's blocks, and Wan 2.1's
    declaration (which claims every such file) reads the header and names their
    architecture (files.py); their own declarations only assemble them."""
    return False


# Diffusers converts Wan-AI's keys itself (single_file_utils.convert_wan_*).
WAN21_FILE = TransformerFile(
    # Its blocks too, so that an fp8 file's weight matrices are counted as its own.
    markers=("patch_embedding.", "head.modulation", "blocks."),
    split_parts=(UMT5, WAN_VAE),
    read_header=files.read_header,
    transformer_class="WanTransformer3DModel",
    components=((UMT5, "text_encoder"),),
    tokenizers="app.engine.generation.families.wan.umt5:tokenizers",
    parts_problem=umt5.parts_problem,
)

WAN21 = FamilySpec(
    architecture=WAN21_ID,
    label="Wan 2.1",
    transformer=True,
    native_size=832,  # its 480p clips are 832x480
    folder=Folder(
        pipelines=("WanPipeline",),
        parts=WAN_PARTS,
        claims=lambda configs: not expands_timesteps(configs),
    ),
    pipeline="WanPipeline",
    driven_pipelines=("WanPipeline",),
    driver="app.engine.generation.families.wan.model:WanFamily",
    checkpoint_family="wan2.1",
    checkpoint_label="Wan 2.1",
    # `WanPipeline` runs First Block Cache with "cond"/"uncond" contexts, as `model.py` does
    # (on `transformer` only: a Wan 2.2 folder's low-noise expert runs uncached, as stock).
    step_cache=True,
    requests=Requests(
        samplers=WAN_SAMPLERS,
        size_multiple=WAN_SIZE_MULTIPLE,
        img2img=False,
        img2img_refusal="Wan 2.1 text to video takes no input image; choose an image-to-video "
        "model (Wan 2.1 I2V or Wan 2.2 TI2V)",
        reference_images=False,
    ),
    float16_overflowing_encoders=("text_encoder",),  # UMT5, as T5 v1.1
    preview="app.engine.generation.families.wan.model:WanPreviewer",
    # Its VAE packs 4 frames into each latent frame after the first: 4k+1 frames.
    video=VideoRequests(frame_step=4, default_frames=81, default_fps=16),
    transformer_file=WAN21_FILE,
)

WAN22_TI2V = replace(
    WAN21,
    architecture=WAN22_TI2V_ID,
    label="Wan 2.2 TI2V",
    native_size=1280,  # its 720p clips are 1280x704
    folder=Folder(pipelines=("WanPipeline",), parts=WAN_PARTS, claims=expands_timesteps),
    # The stock image-to-video pipeline: with an image, as its model card runs it; without
    # one, Easel's loop is `WanPipeline`'s (the first frame's timestep zeroed only then).
    pipeline="WanImageToVideoPipeline",
    driven_pipelines=("WanImageToVideoPipeline",),
    driver=IMAGE_DRIVERS.format("Ti2v"),
    checkpoint_family="wan2.2-ti2v",
    checkpoint_label="Wan 2.2 TI2V",
    # Its VAE's 16 (8 and a 2x2 pixel patch) times the transformer's 2x2 patches.
    requests=replace(WAN21.requests, size_multiple=32, img2img=True, img2img_refusal=""),
    # Wan-AI/Wan2.2-TI2V-5B-Diffusers' model card: 121 frames at 24 fps.
    video=VideoRequests(frame_step=4, default_frames=121, default_fps=24, takes_image=True),
    # `WanImageToVideoPipeline` runs First Block Cache in the same "cond"/"uncond" contexts
    # (tests/engine/generation/test_step_cache_wan_image.py: equal to stock with the hook).
    step_cache=True,
    # Its files are detected by Wan 2.1's declaration (files.py: by their 48 latent
    # channels; this one claims none itself), assembled by this one: Wan 2.2's VAE in
    # Wan-AI's keys, which diffusers' single-file code does not convert (vae22.py).
    transformer_file=replace(
        WAN21_FILE,
        claims=read_by_wan21,
        part_loaders=((WAN_VAE, "app.engine.generation.families.wan.vae22:vae"),),
    ),
)

# A clip from an image (Wan 2.1 I2V's, and Wan 2.2 I2V A14B's with a last image too).
I2V_VIDEO = VideoRequests(
    frame_step=4, default_frames=81, default_fps=16, takes_image=True, needs_image=True
)

WAN21_I2V = replace(
    WAN21,
    architecture=WAN21_I2V_ID,
    label="Wan 2.1 I2V",
    folder=Folder(
        pipelines=("WanImageToVideoPipeline",),
        parts=WAN_PARTS,
        claims=lambda configs: reads_images(configs) and not reads_two_images(configs),
    ),
    optional_parts=("image_encoder", "image_processor", "transformer_2"),
    pipeline="WanImageToVideoPipeline",
    driven_pipelines=("WanImageToVideoPipeline",),
    driver=IMAGE_DRIVERS.format("I2v"),
    checkpoint_family="wan2.1-i2v",
    checkpoint_label="Wan 2.1 I2V",
    requests=replace(WAN21.requests, img2img=True, img2img_refusal=""),
    video=I2V_VIDEO,
    # `WanImageToVideoPipeline` runs First Block Cache in the same "cond"/"uncond" contexts
    # (tests/engine/generation/test_step_cache_wan_image.py: equal to stock with the hook).
    step_cache=True,
    # Its files are detected by Wan 2.1's declaration (files.py: by the transformer's image
    # embedding), assembled by this one: ComfyUI's CLIP vision file in clip_vision/ beside
    # them (clip_vision.py), the shipped image processor.
    transformer_file=replace(
        WAN21_FILE,
        claims=read_by_wan21,
        find_folders=clip_vision.find_clip_vision,
        folder_components="app.engine.generation.families.wan.clip_vision:components",
    ),
)

WAN21_FLF2V = replace(
    WAN21_I2V,
    architecture=WAN21_FLF2V_ID,
    label="Wan 2.1 FLF2V",
    native_size=1280,  # Wan-AI/Wan2.1-FLF2V-14B-720P: 1280x720 clips
    folder=Folder(pipelines=("WanImageToVideoPipeline",), parts=WAN_PARTS, claims=reads_two_images),
    driver=IMAGE_DRIVERS.format("Flf2v"),
    checkpoint_family="wan2.1-flf2v",
    checkpoint_label="Wan 2.1 FLF2V",
    transformer_file=None,  # diffusers folders only
    # Not declared (yet): stock `WanImageToVideoPipeline` with First Block Cache is not
    # tested with a last image.
    step_cache=False,
    # Its CLIP positions are two images' (`pos_embed_seq_len`): a first and a last frame.
    video=VideoRequests(
        frame_step=4,
        default_frames=81,
        default_fps=16,
        takes_image=True,
        needs_image=True,
        takes_last_image=True,
        needs_last_image=True,
    ),
)

WAN22_I2V = replace(
    WAN21_I2V,
    architecture=WAN22_I2V_ID,
    label="Wan 2.2 I2V",
    folder=Folder(pipelines=("WanImageToVideoPipeline",), parts=WAN_PARTS, claims=has_i2v_experts),
    # Wan 2.1 I2V's driver (image.py) runs it, so its checkpoints say Wan 2.1 I2V's family,
    # as they did when such folders were detected as Wan 2.1 I2V.
    # Its expert files are detected by Wan 2.1's declaration (files.py: Wan 2.1 I2V's input
    # channels, no image embedding), paired by name (files/expert_files.py); they read no
    # CLIP file (clip_vision.py finds none for them).
    # Stock `WanImageToVideoPipeline` takes `last_image` on its experts (no CLIP: the last
    # image rides in the condition latents and mask alone).
    video=replace(I2V_VIDEO, takes_last_image=True),
)

FAMILIES = (WAN21, WAN21_FLF2V, WAN21_I2V, WAN22_TI2V, WAN22_I2V)
