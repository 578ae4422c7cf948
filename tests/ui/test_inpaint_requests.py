"""What the mask editor submits: an Easel result as a child of its job, a file stored with
the job, an outpaint's canvas and mask; bad masks refused before anything is stored."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from app.engine.jobs.follow_ups import submit_with_follow_ups
from app.engine.jobs.graph import init_image_of, mask_of, parents_of
from app.engine.jobs.mask import Extension, Fill, InvalidMask, open_mask
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.ui.presenters.inpaint_requests import (
    EditedImage,
    InpaintSettings,
    inpaint_job,
    outpaint_job,
)


def png(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


PICTURE = png(Image.new("RGB", (64, 48), (200, 10, 10)))


def mask(
    size: tuple[int, int] = (64, 48), box: tuple[int, int, int, int] | None = (0, 0, 8, 8)
) -> bytes:
    image = Image.new("L", size, 0)
    if box:
        image.paste(255, box)
    return png(image)


def test_an_easel_result_is_inpainted_as_a_child_of_its_job(queue: JobQueue) -> None:
    parent = queue.submit(GenerationParams("a cat", width=64, height=48, seed=1))
    edited = EditedImage(PICTURE, 64, 48, parent, GenerationParams("a cat", width=64, height=48))
    job = inpaint_job(edited, InpaintSettings("a hat", 0.6, 2, True, 16), mask())
    [child] = submit_with_follow_ups(queue, job).jobs
    stored = queue.get(child)
    assert (stored.prompt, stored.init_image, stored.strength) == ("a hat", f"job:{parent}", 0.6)
    assert (stored.mask_blur, stored.only_masked, stored.mask_padding) == (2, True, 16)
    assert parents_of(queue, child) == [parent]
    assert mask_of(queue, stored) == mask()


def test_a_file_is_stored_with_its_inpaint(queue: JobQueue) -> None:
    job = inpaint_job(EditedImage(PICTURE, 64, 48), InpaintSettings("a dog"), mask())
    [new] = submit_with_follow_ups(queue, job).jobs
    stored = queue.get(new)
    assert init_image_of(queue, stored) == PICTURE and parents_of(queue, new) == []


@pytest.mark.parametrize(
    ("mask_png", "message"),
    [
        (mask((48, 64)), "the mask is 48x64 but the image is 64x48"),
        (mask(box=None), "the mask is empty"),
        (b"not a png", "the mask is not an image that can be read"),
    ],
)
def test_bad_masks_are_refused(queue: JobQueue, mask_png: bytes, message: str) -> None:
    with pytest.raises(InvalidMask, match=message):
        inpaint_job(EditedImage(PICTURE, 64, 48), InpaintSettings("a dog"), mask_png)


@pytest.mark.parametrize("fill", list(Fill))
def test_an_outpaint_grows_the_canvas_and_masks_the_new_area(queue: JobQueue, fill: Fill) -> None:
    job = outpaint_job(EditedImage(PICTURE, 64, 48), "more sky", Extension(top=16, right=8), fill)
    [new] = submit_with_follow_ups(queue, job).jobs
    stored = queue.get(new)
    assert (stored.width, stored.height, stored.strength) == (72, 64, 1.0)
    painted = np.asarray(open_mask(mask_of(queue, stored) or b""))
    assert painted[:16].min() == 255 and painted[:, 64:].min() == 255
    assert painted[16:, :64].max() == 0
    canvas = np.asarray(Image.open(io.BytesIO(init_image_of(queue, stored) or b"")))
    assert (canvas[16:, :64] == (200, 10, 10)).all()  # the picture is where it was


def test_an_outpaint_past_the_largest_size_is_refused() -> None:
    with pytest.raises(InvalidMask, match="the extended canvas would be 2112x48"):
        outpaint_job(EditedImage(PICTURE, 64, 48), "", Extension(right=2048), Fill.EDGE)


def test_an_inpaints_rerun_keeps_its_mask_and_its_follow_ups_start_from_its_image(
    queue: JobQueue,
) -> None:
    from app.engine.jobs.follow_ups import submit_upscale, submit_variations
    from app.engine.jobs.states import JobEvent

    job = inpaint_job(EditedImage(PICTURE, 64, 48), InpaintSettings("a dog"), mask())
    [first] = submit_with_follow_ups(queue, job).jobs
    queue.fire(first, JobEvent.CANCEL, source="user")
    again = queue.get(queue.rerun(first))
    assert again.mask == queue.get(first).mask and mask_of(queue, again) == mask()
    upscale = queue.get(submit_upscale(queue, again.id or 0))
    [variation] = submit_variations(queue, again.id or 0, count=1)
    for follower in (upscale, queue.get(variation)):
        assert (follower.init_image, follower.mask) == (f"job:{again.id}", "")
