"""Inpaint and outpaint from the command line: `submit --init-image X --mask M.png`,
`inpaint N --mask M.png` (repaint part of job N's image) and `outpaint N --left 128 ...`
(extend job N's canvas). Masks are checked here, before anything is stored."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from app.cli import arguments
from app.cli.control import control_from_args, reference_from_args
from app.cli.graph import DEFAULT_IMG2IMG_STRENGTH, last_image_png, request_from_args
from app.cli.jobs import check_model, with_queue
from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.init_image import fit_to, open_rgb, prepare_init_image, read_init_image
from app.engine.jobs.mask import Extension, Fill, open_mask, png_bytes, prepare_mask, read_mask
from app.engine.jobs.params import (
    DEFAULT_MASK_BLUR,
    DEFAULT_MASK_PADDING,
    RANDOM_SEED,
    GenerationParams,
    InvalidParameters,
)
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.settings import load_settings
from app.engine.store.repaint import MaskSettings, Repaint, inpaint_job, outpaint_job


def add_commands(commands: argparse._SubParsersAction) -> None:
    submit = commands.choices["submit"]
    add_mask_arguments(submit)
    submit.set_defaults(run=with_queue(submit_with_inputs))

    inpaint = commands.add_parser(
        "inpaint", help="queue a repaint of part of a job's image (white in the mask)"
    )
    inpaint.add_argument("job_id", type=arguments.job_id, metavar="ID")
    inpaint.add_argument("--mask", type=Path, required=True, metavar="PNG")
    inpaint.add_argument("--prompt", help="what to paint there (default: the job's prompt)")
    inpaint.add_argument(
        "--strength", type=float, default=DEFAULT_IMG2IMG_STRENGTH,
        help=f"how much of the masked area is redrawn (default {DEFAULT_IMG2IMG_STRENGTH})",
    )  # fmt: skip
    inpaint.add_argument("--seed", type=int, default=RANDOM_SEED)
    _add_model_arguments(inpaint)
    _add_settings(inpaint)
    inpaint.set_defaults(run=with_queue(_inpaint))

    out = commands.add_parser("outpaint", help="queue an extension of a job's finished image")
    out.add_argument("job_id", type=arguments.job_id, metavar="ID")
    for side in ("left", "right", "top", "bottom"):
        out.add_argument(f"--{side}", type=int, default=0, metavar="PX")
    out.add_argument(
        "--fill", choices=[fill.value for fill in Fill], default=Fill.EDGE.value,
        help="what the new area starts as: the edge colours stretched out, or noise",
    )  # fmt: skip
    out.add_argument("--prompt", help="what to paint there (default: the job's prompt)")
    out.add_argument("--seed", type=int, default=RANDOM_SEED)
    out.add_argument("--mask-blur", type=int, default=DEFAULT_MASK_BLUR, metavar="PX")
    _add_model_arguments(out)
    out.set_defaults(run=with_queue(_outpaint))


def add_mask_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("inpaint")
    group.add_argument(
        "--mask", type=Path, metavar="PNG",
        help="inpaint: repaint where this mask is white (the size of --init-image)",
    )  # fmt: skip
    _add_settings(group)


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default="", help="the model that paints it (default: the job's: Flux.1 Fill?)"
    )  # fmt: skip
    parser.add_argument("--cfg", type=float, help="its cfg (default: the job's; Flux.1 Fill: 30)")


def _repaint(args: argparse.Namespace) -> Repaint:
    return Repaint(args.prompt or "", args.seed, args.model, args.cfg)


def _add_settings(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--mask-blur", type=int, metavar="PX", help=f"default {DEFAULT_MASK_BLUR}")
    parser.add_argument(
        "--only-masked", action="store_true",
        help="generate only the mask's box (plus --padding) at the job's size, paste it back",
    )  # fmt: skip
    parser.add_argument("--padding", type=int, metavar="PX", help=f"default {DEFAULT_MASK_PADDING}")


def _settings(args: argparse.Namespace, params: GenerationParams) -> GenerationParams:
    return replace(
        params,
        mask_blur=DEFAULT_MASK_BLUR if args.mask_blur is None else args.mask_blur,
        only_masked=args.only_masked,
        mask_padding=DEFAULT_MASK_PADDING if args.padding is None else args.padding,
    )


def asks_for_inputs(args: argparse.Namespace) -> bool:
    """Whether a `submit` names a mask or a mask setting, control layers, a reference
    image or a clip's last image: one job with stored inputs, which `submit_with_inputs` makes."""
    return (
        args.mask is not None
        or args.only_masked
        or args.mask_blur is not None
        or args.padding is not None
        or bool(args.control)
        or bool(args.reference)
        or getattr(args, "last_image", None) is not None
    )


def submit_with_inputs(args: argparse.Namespace, queue: JobQueue) -> int:
    params, init_png = request_from_args(args)
    mask_png = None
    if args.mask is None:
        if args.only_masked or args.mask_blur is not None or args.padding is not None:
            raise InvalidParameters("--mask-blur, --only-masked and --padding need --mask")
    elif init_png is None or args.init_image is None:
        raise InvalidParameters("--mask needs --init-image (the image to repaint)")
    else:
        source = open_rgb(read_init_image(args.init_image))
        mask = prepare_mask(read_mask(args.mask), source.size)
        if args.only_masked:  # the whole picture is kept at its own size, the box generated
            init_png = prepare_init_image(read_init_image(args.init_image)).png
        mask_png = _fitted(mask, open_rgb(init_png).size)
        params = _settings(args, replace(params, init_image=digest(init_png)))
        params = replace(params, mask=digest(mask_png)).validated()
        check_model(params)
    params, control_pngs = control_from_args(args, params)
    params, reference_pngs = reference_from_args(args, params)
    attempts = load_settings().max_attempts
    job = NewJob(
        params, parents=args.after, max_attempts=attempts,
        inputs=RunInputs(
            init_png, mask_png, control_pngs, reference_pngs,
            last_image=last_image_png(args, params),
        ),
    )  # fmt: skip
    return _submitted(queue, job)


def _inpaint(args: argparse.Namespace, queue: JobQueue) -> int:
    settings = MaskSettings(
        DEFAULT_MASK_BLUR if args.mask_blur is None else args.mask_blur, args.only_masked,
        DEFAULT_MASK_PADDING if args.padding is None else args.padding,
    )  # fmt: skip
    job = inpaint_job(
        queue, args.job_id, read_mask(args.mask), repaint=_repaint(args),
        strength=args.strength, settings=settings, check=check_model,
        max_attempts=load_settings().max_attempts,
    )  # fmt: skip
    return _submitted(queue, job)


def _outpaint(args: argparse.Namespace, queue: JobQueue) -> int:
    settings = load_settings()  # on a shared queue, a file here only inside its outputs folder
    job = outpaint_job(
        queue, args.job_id, Extension(args.left, args.right, args.top, args.bottom),
        fill=Fill(args.fill), repaint=_repaint(args),
        mask_blur=args.mask_blur, outputs_dir=settings.outputs_path(), check=check_model,
        max_attempts=settings.max_attempts,
    )  # fmt: skip
    return _submitted(queue, job)


def _fitted(mask_png: bytes, size: tuple[int, int]) -> bytes:
    mask = open_mask(mask_png)
    return mask_png if mask.size == size else png_bytes(fit_to(mask, size))


def _submitted(queue: JobQueue, job: NewJob) -> int:
    [job_id] = submit_with_follow_ups(queue, job, source="cli").jobs
    print(job_id)
    return 0
