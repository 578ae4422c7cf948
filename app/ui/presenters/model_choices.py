"""What the model picker shows for each model, and the size presets that follow it (no Qt).

Made from the engine's `ModelInfo` off the GUI thread (`app.ui.wiring.model_choices`), so the
picker never touches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

from app.engine.jobs.params import SIZE_MULTIPLE as SIZE_STEP
from app.ui.presenters.i18n import translate

# For a model the scan did not find (a dropped PNG names one that is not installed): the
# sizes every Stable Diffusion family can at least be asked for; the engine checks at submit.
FALLBACK_PRESETS: tuple[tuple[int, int], ...] = (
    (512, 512), (512, 768), (768, 512), (768, 768), (1024, 1024),
)  # fmt: skip


@dataclass(frozen=True)
class FewStepModel:
    """A few-step model's own settings (a distilled LTX-Video: engine prompts/few_step.py):
    the form's defaults when the artist picks it."""

    label: str  # "LTX-Video distilled"
    steps: int
    cfg: float
    sampler: str
    schedule: str  # the job's scheduler_config at these steps and sampler (its timesteps)


@dataclass(frozen=True)
class ModelChoice:
    name: str
    kind: str = ""  # "SDXL", "SD 1.x v-prediction"; "" when unsupported or unknown
    native_size: int = 0
    presets: tuple[tuple[int, int], ...] = FALLBACK_PRESETS
    unsupported_reason: str = ""
    max_side: int = 0  # the engine refuses larger sizes at submit (0: no limit known)
    disk_bytes: int = 0  # its file or folder on disk (0: not known)
    samplers: tuple[str, ...] = ()  # the samplers it takes; (): every one (flow models: Euler)
    takes_negative_prompt: bool = True  # Flux.1 runs without true CFG: a negative does nothing
    distilled_guidance: bool = False  # CFG is the model's guidance input (Flux.1 dev)
    quantisation: str = ""  # how its diffusion model is stored: "Q8_0" (GGUF), "fp8", ""
    edits: bool = False  # follows an instruction to edit an image (Flux.1 Kontext)
    edit_images: int = 1  # the most input images an edit on it reads (Qwen-Image-Edit Plus: 3)
    edit_steps: int = 28  # the steps and cfg an edit on it runs with unless told (its stock
    edit_cfg: float = 3.5  # pipeline's defaults: Kontext's 28 and 3.5, Qwen-Image-Edit's 50, 4)
    # A video model: its frame counts are frame_step * k + 1 (Wan: 4); 0 draws images.
    frame_step: int = 0
    default_frames: int = 0  # its stock pipeline's frame count (Wan 2.1: 81)
    default_fps: int = 0  # the rate its clips were trained at (Wan 2.1: 16)
    takes_last_image: bool = False  # a clip's last frame beside its first (Wan 2.1 FLF2V)
    weighs_images: bool = False  # a strength for each of a clip's images (LTX-Video 0.9.5+)
    architecture: str = ""  # its family's id ("flux1"): which ControlNets fit it; "": unknown
    few_step: FewStepModel | None = None  # a distilled model's steps, CFG and schedule

    @property
    def draws_video(self) -> bool:
        return self.frame_step > 0

    def allows_sampler(self, sampler: str) -> bool:
        return not self.samplers or sampler in self.samplers

    def too_large(self, width: int | None, height: int | None) -> bool:
        return bool(self.max_side) and max(width or 0, height or 0) > self.max_side

    def beyond_training(self, width: int | None, height: int | None) -> bool:
        """Larger than the model was trained for (A1111's reason for hires fix): the model
        repeats its subject in tiles. A quarter over is still fine."""
        return bool(self.native_size) and max(width or 0, height or 0) > self.native_size * 1.25

    def fitted(self, width: int, height: int) -> tuple[int, int]:
        """`width` x `height` (an image's) made a size this model takes: at most `max_side`
        a side, the shape kept, each side a multiple of 8."""
        scale = min(1.0, self.max_side / max(width, height)) if self.max_side else 1.0
        return tuple(  # type: ignore[return-value]
            max(SIZE_STEP, int(side * scale) // SIZE_STEP * SIZE_STEP) for side in (width, height)
        )

    def size_note(self, width: int | None, height: int | None) -> str:
        """What to say beside the size fields ("": nothing)."""
        if self.too_large(width, height):
            return translate("ModelChoice", "{name} takes at most {side} px a side").format(
                name=self.name, side=self.max_side
            )
        if self.beyond_training(width, height):
            return translate(
                "ModelChoice",
                "{name} was trained at {side} px: larger, it repeats the picture in tiles",
            ).format(name=self.name, side=self.native_size)
        return ""

    @property
    def supported(self) -> bool:
        return not self.unsupported_reason

    def label(self) -> str:
        """The picker's line: "sdxl-base · SDXL, 1024 px · 6.5 GB", "flux1-dev-Q8_0 · Flux.1,
        1024 px · Q8_0 · 12.7 GB" or "broken · unsupported"."""
        if not self.supported:
            detail = translate("ModelChoice", "unsupported")
        elif self.kind and self.native_size:
            detail = translate("ModelChoice", "{kind}, {size} px").format(
                kind=self.kind, size=self.native_size
            )
        else:
            return self.name
        if self.quantisation and self.supported:
            detail += f" · {self.quantisation}"
        size = f" · {disk_size_text(self.disk_bytes)}" if self.disk_bytes else ""
        return f"{self.name} · {detail}{size}"

    def preset_label(self, index: int) -> str:
        width, height = self.presets[index]
        size = f"{width} × {height}"
        if index == 0 and self.native_size and (width, height) == (self.native_size,) * 2:
            return translate("ModelChoice", "{size} · native").format(size=size)
        return size


@dataclass(frozen=True)
class LoraChoice:
    """A LoRA file in the picker: its name, the picture beside it (A1111's name.preview.png
    or name.png; "" when there is none) and its size on disk."""

    name: str
    preview: str = ""
    disk_bytes: int = 0

    def tooltip(self) -> str:
        """Rich text: the name, its size, and its preview picture when there is one."""
        size = f" · {disk_size_text(self.disk_bytes)}" if self.disk_bytes else ""
        text = f"<b>{escape(self.name)}</b>{size}"
        if self.preview:
            source = escape(Path(self.preview).as_uri(), quote=True)
            text += f'<br><img src="{source}" width="{LORA_PREVIEW_PX}">'
        return text


LORA_PREVIEW_PX = 160  # the preview's width in the LoRA list's tooltip


def disk_size_text(size: int) -> str:
    """ "6.5 GB", "320 MB", "12 kB": what a file takes on disk, as a file manager says it."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{max(1, round(size / 1e3))} kB"


def unknown_model(name: str) -> ModelChoice:
    return ModelChoice(name=name)
