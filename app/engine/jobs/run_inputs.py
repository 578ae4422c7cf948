"""What a job's run needs beyond its parameters: the images they name, as PNG bytes.

The parameters name each image (by digest, or `job:<id>` for a parent's output); these are
the bytes. One object travels the whole way: the submitter hands it to `JobQueue.submit`
(stored with the job, `job_input` rows), the worker builds it once from the claimed job
(`graph.run_inputs_of`, which also reads a parent's output) and every runner takes it
(`RunnerLike.run`). Pure data: no torch, no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class RunInputs:
    """A job's images: each field is checked against the parameters that name it (at
    submit by `graph_sql.check_inputs`, in the runner again)."""

    init_image: bytes | None = None  # img2img's, inpaint's and an upscale's starting image
    mask: bytes | None = None  # inpaint: white where to repaint
    control_images: Sequence[bytes] = ()  # each control layer's image, in layer order
    reference_images: Sequence[bytes] = ()  # each reference image (IP-Adapter), in order
    edit_images: Sequence[bytes] = ()  # an edit's input images after its init image, in order
    last_image: bytes | None = None  # a first-and-last-frame clip's last frame

    def __post_init__(self) -> None:
        # Tuples whatever the caller gave (a list from a form): the object stays immutable.
        object.__setattr__(self, "control_images", tuple(self.control_images))
        object.__setattr__(self, "reference_images", tuple(self.reference_images))
        object.__setattr__(self, "edit_images", tuple(self.edit_images))


NO_INPUTS = RunInputs()  # text to image: the parameters are the whole request
