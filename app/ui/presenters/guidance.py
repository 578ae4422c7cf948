"""The window's control layers and reference images, Qt-free: what the Control section
holds, its preprocessed images, and the job it asks for.

No torch: the preprocessors are OpenCV (`jobs.control_image`), run when a layer's image or
preprocessor changes, so the section shows exactly the image that will be stored with the
job; ControlNets and IP-Adapters are listed from their files (`controlnets`, `ip_adapters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from app.engine.generation.guidance.controlnets import list_controlnets, union_types
from app.engine.generation.guidance.ip_adapters import list_ip_adapters
from app.engine.generation.guidance.redux_models import list_redux_models
from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.jobs.run_inputs import RunInputs

if TYPE_CHECKING:
    from app.engine.jobs.follow_ups import NewJob


@dataclass
class GuideLayer:
    """One row of the section: a control layer (`module` set) or a reference image."""

    source: bytes  # the image as given (file, paste, drop)
    model: str = ""  # the ControlNet or IP-Adapter
    module: str = "none"  # control layers: the preprocessor
    weight: float = 1.0
    start: float = 0.0
    end: float = 1.0
    enabled: bool = True
    control_type: str = ""  # a ControlNet Union's control type ("": the preprocessor's kind)
    _output: tuple[str, bytes] | None = field(default=None, repr=False)

    @property
    def waiting(self) -> bool:
        """Restored from a PNG's settings: its control image is still to be given."""
        return not self.source

    @property
    def image(self) -> bytes:
        """What is stored with the job: the source through the preprocessor (cached)."""
        if self._output is None or self._output[0] != self.module:
            # numpy and OpenCV load with the first layer, not with the window.
            from app.engine.jobs.control_image import preprocess

            self._output = (self.module, preprocess(self.module, self.source))
        return self._output[1]


def controlnet_names(architecture: str = "") -> list[str]:
    """The usable ControlNets; given a model's `architecture` id ("flux1"), those made for
    it (a Flux.1 model is offered Flux ControlNets, SDXL SDXL's); "": every one."""
    usable = [info for info in list_controlnets() if info.supported]
    if architecture:
        usable = [info for info in usable if str(info.architecture) == architecture]
    return [info.name for info in usable]


def controlnet_union_types(name: str) -> tuple[str, ...]:
    """The control types the ControlNet called `name` is told, by its table's order: a
    Union's own (Flux.1's or SDXL's); none for a single-mode net or an unknown name."""
    for info in list_controlnets():
        if info.name == name:
            return union_types(info.architecture) if info.union and info.supported else ()
    return ()


def ip_adapter_names() -> list[str]:
    return [info.name for info in list_ip_adapters()]


def reference_model_names() -> list[str]:
    """What a reference image may name: the IP-Adapters (SD 1.x, SDXL), then the Redux
    models (Flux.1); submit says which one a model cannot use."""
    return ip_adapter_names() + [info.name for info in list_redux_models()]


def guided_job(
    params: GenerationParams,
    count: int,
    layers: Sequence[GuideLayer],
    references: Sequence[GuideLayer] = (),
    max_attempts: int = 3,
    init_png: bytes | None = None,
) -> NewJob:
    """The job the form asks for with the section's enabled layers and references;
    `init_png`: the form's init image (img2img), if it has one."""
    # Where the submit happens, not at window start-up: `follow_ups` and `graph_sql` hold
    # the queue's SQL (SQLAlchemy, SQLModel), a second of imports the window must not wait for.
    from app.engine.jobs.follow_ups import NewJob

    job = NewJob(params, count, inputs=RunInputs(init_image=init_png), max_attempts=max_attempts)
    return with_guidance(job, layers, references)


def with_guidance(
    job: NewJob, layers: Sequence[GuideLayer], references: Sequence[GuideLayer] = ()
) -> NewJob:
    """`job` (from the form, or the mask editor's inpaint) guided by the enabled layers and
    references, their images stored with it."""
    from app.engine.jobs.graph_sql import digest  # as in `guided_job`: not at start-up

    controls = [layer for layer in layers if layer.enabled and not layer.waiting]
    styles = [r for r in references if r.enabled and not r.waiting]
    control = [
        ControlLayer(digest(layer.image), layer.model, layer.module, layer.weight, layer.start,
                     layer.end, layer.control_type)
        for layer in controls
    ]  # fmt: skip
    reference = [ReferenceImage(digest(r.image), r.model, r.weight) for r in styles]
    params = replace(
        job.params, control=encode_control(control), reference=encode_reference(reference)
    )
    inputs = replace(
        job.inputs, control_images=[layer.image for layer in controls],
        reference_images=[r.image for r in styles],
    )  # fmt: skip
    return replace(job, params=params, inputs=inputs)
