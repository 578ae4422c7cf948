"""What the model picker shows for each model, and the size presets that follow it (no Qt).

Made from the engine's `ModelInfo` off the GUI thread (`app.ui.wiring.model_choices`), so the
picker never touches the disk.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.ui.presenters.i18n import translate

# For a model the scan did not find (a dropped PNG names one that is not installed): the
# sizes every Stable Diffusion family can at least be asked for; the engine checks at submit.
FALLBACK_PRESETS: tuple[tuple[int, int], ...] = (
    (512, 512), (512, 768), (768, 512), (768, 768), (1024, 1024),
)  # fmt: skip


@dataclass(frozen=True)
class ModelChoice:
    name: str
    kind: str = ""  # "SDXL", "SD 1.x v-prediction"; "" when unsupported or unknown
    native_size: int = 0
    presets: tuple[tuple[int, int], ...] = FALLBACK_PRESETS
    unsupported_reason: str = ""
    max_side: int = 0  # the engine refuses larger sizes at submit (0: no limit known)

    def too_large(self, width: int | None, height: int | None) -> bool:
        return bool(self.max_side) and max(width or 0, height or 0) > self.max_side

    @property
    def supported(self) -> bool:
        return not self.unsupported_reason

    def label(self) -> str:
        """The picker's line: "sdxl-base · SDXL, 1024 px" or "broken · unsupported"."""
        if not self.supported:
            detail = translate("ModelChoice", "unsupported")
        elif self.kind and self.native_size:
            detail = translate("ModelChoice", "{kind}, {size} px").format(
                kind=self.kind, size=self.native_size
            )
        else:
            return self.name
        return f"{self.name} · {detail}"

    def preset_label(self, index: int) -> str:
        width, height = self.presets[index]
        size = f"{width} × {height}"
        if index == 0 and self.native_size and (width, height) == (self.native_size,) * 2:
            return translate("ModelChoice", "{size} · native").format(size=size)
        return size


def unknown_model(name: str) -> ModelChoice:
    return ModelChoice(name=name)
