"""What a clip will need, estimated from its latent shape before it starts (no torch).

Disk: a rolling checkpoint of a clip holds its latents (with UniPC, two more latent-sized
outputs and the last sample: four copies, in float32) and the UMT5 states of its prompt and
negative (512 tokens x the encoder's width). Measured (benchmarks/video.py): an 81-frame
832x480 Wan 2.1 clip's UniPC checkpoint is 41.9 MB on a GPU in bfloat16; the estimate here
is the worst case, every tensor in float32 (a CPU run), 50.3 MB.

`check_checkpoint_room` is part of the submit check (`request_checks.check_runnable`), so
every door (the CLI's submit and generate, the native API, the window) refuses a clip whose
checkpoint this machine's data folder cannot hold, in one sentence, storing nothing.

Memory (`clip_memory`, beside the weights, which are loaded by then): a denoising step's
activations, the transformer's widest point (its feed-forward layer and the attention's
projections) over every token of the clip, and the VAE's decode, which diffusers' Wan VAE
already does one latent frame (4 frames) at a time with a causal cache (its own temporal
chunking), but over the whole picture unless tiled (`enable_tiling`: 256x256 tiles, which
bounds the decode's activations whatever the size). The runner tiles when the whole decode
would not fit beside the step's activations, and refuses a clip that does not fit even so.
These are estimates from the configs, not measurements: only a GPU with real weights can
say how close they come.
"""

from __future__ import annotations

import json
import math
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.engine import paths
from app.engine.jobs.params import GenerationParams
from app.errors import BadInput

MB = 1_000_000
FLOAT32_BYTES = 4
# A checkpoint's latent-sized tensors at most: the latents, UniPC's two model outputs
# (solver order 2) and its last sample; Euler keeps the latents alone.
LATENT_COPIES = 4
TEXT_STATES = 2  # the prompt's and the negative's
# The rest, whatever the clip: the generator's state (5 KB on a CPU), the scheduler's sigmas
# and timesteps, the header line with the parameters, torch.save's framing.
CHECKPOINT_OVERHEAD_BYTES = 64 * 1024
# Free space kept beyond the checkpoints: the database's growth, logs, the clip's MP4.
DISK_MARGIN_BYTES = 256 * MB


@dataclass(frozen=True)
class VideoConfig:
    """What sizes a clip's tensors, from the model folder's configs."""

    latent_channels: int  # the VAE's z_dim
    frames_per_latent: int  # the VAE's temporal factor (4: 4k+1 frames)
    pixels_per_latent: int  # the VAE's spatial factor (8)
    text_tokens: int  # the prompt's states are padded to this many tokens
    text_width: int  # the text encoder's width (UMT5-XXL: 4096)


# The released Wan 2.1 folders (1.3B and 14B alike): the Wan VAE and UMT5-XXL.
WAN21_RELEASED = VideoConfig(16, 4, 8, 512, 4096)


@dataclass(frozen=True)
class ClipShape:
    latents: tuple[int, ...]  # (1, channels, latent frames, height / 8, width / 8)
    text_states: tuple[int, ...]  # (1, tokens, width): one prompt's encoder states


def clip_shape(config: VideoConfig, frames: int, width: int, height: int) -> ClipShape:
    """The shapes a clip of `frames` frames at `width`x`height` denoises and is steered by."""
    latent_frames = (frames - 1) // config.frames_per_latent + 1
    spatial = config.pixels_per_latent
    latents = (1, config.latent_channels, latent_frames, height // spatial, width // spatial)
    return ClipShape(latents, (1, config.text_tokens, config.text_width))


def checkpoint_bytes(shape: ClipShape) -> int:
    """The most a rolling checkpoint of a clip of `shape` takes on disk: every tensor in
    float32 (a CPU run; a GPU's bfloat16 keeps less), UniPC's four latent copies."""
    latent = math.prod(shape.latents) * LATENT_COPIES
    text = math.prod(shape.text_states) * TEXT_STATES
    return (latent + text) * FLOAT32_BYTES + CHECKPOINT_OVERHEAD_BYTES


# Planes of the picture's size a decode holds at once, per channel of the VAE's widest
# (full-resolution) stage: a latent frame's 4 frames through a conv (input, output and a
# residual, 12) and each causal conv's cache of 2 frames (about 10 convs at that stage).
DECODE_PLANES = 32
DECODE_TILE = 256  # diffusers' AutoencoderKLWan tiles: 256x256 pixels, 192 apart
TILE_OVERLAP = (256 / 192) ** 2  # the decoded tiles kept for blending, overlaps included
# Per token of the clip, beside the feed-forward layer's width: the attention's query, key,
# value and output at the model's width (memory-efficient attention keeps no score matrix).
ATTENTION_WIDTHS = 4


@dataclass(frozen=True)
class ClipMemory:
    """Bytes a clip needs beside its model's weights, at the dtypes it runs in."""

    denoise_bytes: int  # one step's activations over every token
    decode_bytes: int  # the VAE's decode over the whole picture, and the frames it makes
    tiled_decode_bytes: int  # the same in diffusers' 256x256 tiles

    def needed(self, *, tiled: bool) -> int:
        """The most it holds at once: a step's activations are freed before the decode."""
        return max(self.denoise_bytes, self.tiled_decode_bytes if tiled else self.decode_bytes)


def clip_memory(
    folder: Path, params: GenerationParams, *, transformer_bytes: int, vae_bytes: int
) -> ClipMemory:
    """What a clip of `params` on the model in `folder` needs beside the weights: the
    transformer's activations in its dtype (`transformer_bytes` a number), the decode in
    the VAE's (`vae_bytes`)."""
    config = video_config(folder)
    shape = clip_shape(config, params.frames, params.width, params.height)
    transformer = _config(folder / "transformer" / "config.json")
    width = _number(transformer, "num_attention_heads", 40) * _number(
        transformer, "attention_head_dim", 128
    )
    feed_forward = _number(transformer, "ffn_dim", 13824)
    _batch, _channels, latent_frames, latent_height, latent_width = shape.latents
    tokens = latent_frames * (latent_height // 2) * (latent_width // 2)  # (1, 2, 2) patches
    denoise = tokens * (feed_forward + ATTENTION_WIDTHS * width) * transformer_bytes
    vae = _config(folder / "vae" / "config.json")
    channels = _number(vae, "decoder_base_dim", 0) or _number(vae, "base_dim", 96)
    frames_planes = 3 * params.frames  # the RGB frames, joined once more as they are made
    picture = params.width * params.height
    tile = min(DECODE_TILE, params.width) * min(DECODE_TILE, params.height)
    decode = (DECODE_PLANES * channels + 2 * frames_planes) * picture * vae_bytes
    tiled = DECODE_PLANES * channels * tile + (2 + TILE_OVERLAP) * frames_planes * picture
    return ClipMemory(denoise, decode, int(tiled * vae_bytes))


def video_config(folder: Path) -> VideoConfig:
    """The folder's own configs (a tiny test model's as a released one's); a part whose
    config is not in the folder (a single file) counts as the released Wan 2.1's."""
    vae = _config(folder / "vae" / "config.json")
    encoder = _config(folder / "text_encoder" / "config.json")
    released = WAN21_RELEASED
    return VideoConfig(
        latent_channels=_number(vae, "z_dim", released.latent_channels),
        frames_per_latent=_number(vae, "scale_factor_temporal", released.frames_per_latent),
        pixels_per_latent=_number(vae, "scale_factor_spatial", released.pixels_per_latent),
        text_tokens=released.text_tokens,  # the stock pipeline's max_sequence_length
        text_width=_number(encoder, "d_model", released.text_width),
    )


def _number(config: dict[str, object], key: str, default: int) -> int:
    value = config.get(key)
    return value if isinstance(value, int) and value > 0 else default


def _config(path: Path) -> dict[str, object]:
    try:
        loaded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def checkpoints_free_bytes() -> int:
    """Free space where this machine keeps its rolling checkpoints (the data folder)."""
    return shutil.disk_usage(paths.data_dir()).free


def check_checkpoint_room(
    params: GenerationParams, folder: Path, free_bytes: Callable[[], int] | None = None
) -> None:
    """Refuse, in one sentence, a clip whose rolling checkpoints the data folder cannot
    hold: two at once (the next is written beside the last before replacing it) and a
    margin. `free_bytes` reads the free space (None: `checkpoints_free_bytes`, looked up
    now so that a test of a door can replace it)."""
    size = checkpoint_bytes(clip_shape(video_config(folder), params.frames, params.width,
                                       params.height))  # fmt: skip
    needed = 2 * size + DISK_MARGIN_BYTES
    free = (free_bytes or checkpoints_free_bytes)()
    if free < needed:
        raise BadInput(
            f"this clip's progress needs about {_mb(needed)} free on disk (two checkpoints "
            f"of {_mb(size)} and {_mb(DISK_MARGIN_BYTES)} to spare) and the data folder has "
            f"{_mb(free)}; free some space, or ask for fewer frames or a smaller size"
        )


def _mb(size: int) -> str:
    return f"{size / MB:,.0f} MB" if size >= 10 * MB else f"{size / MB:.1f} MB"
