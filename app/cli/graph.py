"""Commands for jobs that build on jobs: img2img and `--after` on submit, upscale, vary, lineage."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from app.cli import arguments
from app.cli.control import add_control_arguments, add_reference_arguments
from app.cli.jobs import check_model, params_from_args, with_queue
from app.cli.terminal import printable
from app.engine.jobs.follow_ups import (
    FollowUps,
    NewJob,
    Upscale,
    Variations,
    submit_with_follow_ups,
)
from app.engine.jobs.graph import (
    DEFAULT_UPSCALE,
    DEFAULT_UPSCALE_STRENGTH,
    DEFAULT_VARIATION_STRENGTH,
    DEFAULT_VARIATIONS,
    children_of,
    parents_of,
    waiting_reason,
)
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import InvalidInitImage, prepare_init_image, read_init_image
from app.engine.jobs.params import GenerationParams, InvalidParameters, parse_size
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.settings import load_settings

DEFAULT_IMG2IMG_STRENGTH = 0.75  # what AUTOMATIC1111 starts its img2img tab with
DEFAULT_SIZE = f"{GenerationParams.width}x{GenerationParams.height}"


def add_commands(commands: argparse._SubParsersAction) -> None:
    _extend_submit(commands.choices["submit"])

    upscale = commands.add_parser(
        "upscale", help="queue a hires-fix upscale of a job's image (waits for the job)"
    )
    upscale.add_argument("job_id", type=arguments.job_id, metavar="ID")
    upscale.add_argument("--scale", type=float, default=DEFAULT_UPSCALE)
    upscale.add_argument("--strength", type=float, default=DEFAULT_UPSCALE_STRENGTH)
    upscale.add_argument(
        "--upscaler", default="", metavar="NAME",
        help="an upscaler model in <models>/upscale_models/ (ESRGAN, SwinIR, HAT, ...) "
        "instead of Lanczos",
    )  # fmt: skip
    upscale.add_argument(
        "--model-only", action="store_true",
        help="with --upscaler: the model upscale alone, no img2img pass after it",
    )  # fmt: skip
    upscale.add_argument(
        "--tiled", action="store_true",
        help="Ultimate SD Upscale: enlarge (with --upscaler, else Lanczos), then img2img "
        "region by region at the model's own size, with a seam fix (for big results)",
    )  # fmt: skip
    upscale.set_defaults(run=with_queue(_upscale))

    vary = commands.add_parser(
        "vary", help="queue variations of a job's image: new seeds, low strength"
    )
    vary.add_argument("job_id", type=arguments.job_id, metavar="ID")
    vary.add_argument("--count", type=arguments.at_least_one, default=DEFAULT_VARIATIONS)
    vary.add_argument("--strength", type=float, default=DEFAULT_VARIATION_STRENGTH)
    vary.set_defaults(run=with_queue(_vary))

    lineage = commands.add_parser(
        "lineage", help="a job's parents and children, and what a blocked job waits for"
    )
    lineage.add_argument("job_id", type=arguments.job_id, metavar="ID")
    lineage.set_defaults(run=with_queue(_lineage))


def _extend_submit(submit: argparse.ArgumentParser) -> None:
    """`submit` (defined in `jobs`) gains img2img, ControlNet layers and dependencies;
    `inpaint` then adds masks and runs it."""
    add_img2img_arguments(submit)
    add_last_image_argument(submit)
    add_control_arguments(submit)
    add_reference_arguments(submit)
    submit.add_argument(
        "--after", type=arguments.job_id, action="append", default=[], metavar="ID",
        help="wait until job ID succeeded (may be given more than once)",
    )  # fmt: skip
    submit.set_defaults(run=with_queue(_submit))


def add_img2img_arguments(parser: argparse.ArgumentParser) -> None:
    """--init-image and --strength, for every command that makes an image (`submit`,
    `generate`); read them with `request_from_args`."""
    group = parser.add_argument_group("img2img")
    group.add_argument(
        "--init-image", type=Path, metavar="PNG", help="img2img: start from this image "
        "(stored with the job; the job takes its size unless --size is given)",
    )  # fmt: skip
    group.add_argument(
        "--strength", type=float, help="img2img: how much of the image is redrawn, "
        f"above 0 up to 1 (default {DEFAULT_IMG2IMG_STRENGTH})",
    )  # fmt: skip
    parser.set_defaults(size=None)  # None: not given, so an init image gives the size


def add_last_image_argument(parser: argparse.ArgumentParser) -> None:
    """--last-image, for the commands that make one job (`submit`, `generate`): a clip's
    last frame, its first being --init-image; read by `request_from_args` and
    `last_image_png`."""
    parser.add_argument(
        "--last-image", type=Path, metavar="PNG", help="with --video and --init-image: the "
        "clip's last frame (a first-and-last-frame model such as Wan 2.1 FLF2V)",
    )  # fmt: skip
    group = parser.add_argument_group("how firmly a clip holds its images (LTX-Video 0.9.5+)")
    group.add_argument(
        "--image-strength", type=float, metavar="S", help="with --video and --init-image: "
        "how firmly the clip holds its first frame, 0 to 1 (default 1: exactly; lower lets "
        "it move away)",
    )  # fmt: skip
    group.add_argument(
        "--last-image-strength", type=float, metavar="S",
        help="with --last-image: how firmly the clip holds it, 0 to 1 (default 1)",
    )  # fmt: skip
    group.add_argument(
        "--last-image-frame", type=int, metavar="N", help="with --last-image: the frame it "
        "is, 1 to the clip's frames - 1 (default: the clip's last)",
    )  # fmt: skip


def condition_args(args: argparse.Namespace) -> dict[str, Any]:
    """--image-strength, --last-image-strength and --last-image-frame where given, as
    `GenerationParams` fields; each refused in one sentence without the image it weighs."""
    given: dict[str, float | int | None] = {
        name: getattr(args, name, None)
        for name in ("image_strength", "last_image_strength", "last_image_frame")
    }
    if given["image_strength"] is not None and args.init_image is None:
        raise InvalidParameters("--image-strength needs --init-image (the clip's first frame)")
    last_given = given["last_image_strength"] is not None or given["last_image_frame"] is not None
    if last_given and getattr(args, "last_image", None) is None:
        raise InvalidParameters("--last-image-strength and --last-image-frame need --last-image")
    return {name: value for name, value in given.items() if value is not None}


def last_image_png(args: argparse.Namespace, params: GenerationParams) -> bytes | None:
    """The PNG of --last-image at the clip's size (what `params.last_image` names)."""
    path = getattr(args, "last_image", None)
    if path is None:
        return None
    try:
        return prepare_init_image(read_init_image(path), (params.width, params.height)).png
    except InvalidInitImage as error:  # its sentence names the init image: this is the last
        said = str(error).replace("the init image", "the last image", 1)
        raise InvalidInitImage(said.replace("The init image", "The last image", 1)) from error


def request_from_args(args: argparse.Namespace) -> tuple[GenerationParams, bytes | None]:
    """The image the command line asks for: its settings and its init image's PNG (None
    for txt2img), checked as a worker would check them (the size an init image gives too)."""
    size_given = args.size is not None
    args.size = args.size or DEFAULT_SIZE
    # Checked against the model files here, or with its init image below (an image-to-video
    # model needs one: the request is checked whole).
    if args.init_image is None and getattr(args, "last_image", None) is not None:
        raise InvalidParameters("--last-image needs --init-image (the clip's first frame)")
    conditions = condition_args(args)
    params = params_from_args(args, check=args.init_image is None)
    if args.init_image is None:
        if args.strength is not None:
            raise InvalidParameters("--strength needs --init-image")
        return params, None
    size = parse_size(args.size) if size_given else None
    prepared = prepare_init_image(read_init_image(args.init_image), size)
    for note in prepared.notes:
        print(f"note: the init image: {note}", file=sys.stderr)
    params = replace(
        params, width=prepared.width, height=prepared.height, init_image=digest(prepared.png),
        strength=DEFAULT_IMG2IMG_STRENGTH if args.strength is None else args.strength,
    ).validated()  # fmt: skip
    last_png = last_image_png(args, params)
    if last_png is not None:
        params = replace(params, last_image=digest(last_png)).validated()
    if conditions:
        params = replace(params, **conditions).validated()
    if getattr(args, "mask", None) is None:  # an inpaint is checked with its mask (inpaint.py):
        check_model(params)  # at the image's size now; a model may inpaint but not img2img
    return params, prepared.png


def _submit(args: argparse.Namespace, queue: JobQueue) -> int:
    params, init_png = request_from_args(args)
    attempts = load_settings().max_attempts  # the user's setting, as the window's submit
    inputs = RunInputs(init_image=init_png, last_image=last_image_png(args, params))
    job = NewJob(params, parents=args.after, inputs=inputs, max_attempts=attempts)
    return _submitted(queue, job)


def _submitted(queue: JobQueue, job: NewJob) -> int:
    [job_id] = submit_with_follow_ups(queue, job, source="cli").jobs
    print(job_id)
    return 0


def _upscale(args: argparse.Namespace, queue: JobQueue) -> int:
    if args.model_only and not args.upscaler:
        raise InvalidParameters("--model-only needs --upscaler NAME")
    if args.model_only and args.tiled:
        raise InvalidParameters("--model-only and --tiled exclude each other")
    if args.upscaler:
        check_upscaler_deeply(args.upscaler)
    upscale = Upscale(
        args.scale, args.strength, args.upscaler, img2img=not args.model_only, tiled=args.tiled
    )
    return _followed(queue, args.job_id, FollowUps(upscale=upscale))


def check_upscaler_deeply(name: str) -> None:
    """The upscaler loaded as the worker will load it (spandrel, weights only): a file that
    is not one is refused now, in one sentence. Torch is imported here, in the command line
    process only (never in the window's)."""
    from app.engine.generation.post.upscale import load_upscaler
    from app.engine.generation.post.upscalers import check_upscaler

    load_upscaler(check_upscaler(name, load_settings().model_search_path()))


def _vary(args: argparse.Namespace, queue: JobQueue) -> int:
    variations = FollowUps(variations=Variations(args.count, args.strength))
    return _followed(queue, args.job_id, variations)


def _followed(queue: JobQueue, job_id: int, follow_ups: FollowUps) -> int:
    """The follow-ups of a stored job, checked as a worker would; prints their ids."""
    submitted = submit_with_follow_ups(
        queue, job_id, follow_ups, source="cli", check=check_model
    )  # fmt: skip
    for new_id in submitted.follow_ups:
        print(new_id)
    return 0


def _lineage(args: argparse.Namespace, queue: JobQueue) -> int:
    job = queue.get(args.job_id)
    print(f"job {job.id}: {job.status}")
    print("parents:  " + (_ids(parents_of(queue, args.job_id)) or "none"))
    print("children: " + (_ids(children_of(queue, args.job_id)) or "none"))
    if reason := waiting_reason(queue, args.job_id):
        print(f"blocked:  {printable(reason)}")
    return 0


def _ids(ids: list[int]) -> str:
    return ", ".join(f"#{job_id}" for job_id in ids)
