"""Edit with words from the command line: `edit N "make it night"` (an edit of job N's
image, a child of job N) and `submit "make it night" --edit-image X.png --model M` (an edit
of a picture). The model must be one that edits (Flux.1 Kontext, Qwen-Image-Edit); the
checks of submit say so in one sentence otherwise, before anything is stored. Qwen-Image-Edit
Plus reads up to 3 input images: `edit N "..." --image B.png` and `submit --edit-image
A.png --edit-image B.png` give it the further ones, in order."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from app.cli import arguments
from app.cli.jobs import Given, check_model, few_step_defaults, with_queue
from app.engine.generation.request_checks import edit_defaults_of
from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.init_image import InvalidInitImage, prepare_init_image, read_init_image
from app.engine.jobs.params import RANDOM_SEED, GenerationParams, InvalidParameters, parse_size
from app.engine.jobs.queue import JobQueue
from app.engine.settings import load_settings, queue_is_shared
from app.engine.store.edits import DefaultsOf, EditSettings, edit_job, picture_edit_job


def add_commands(commands: argparse._SubParsersAction) -> None:
    edit = commands.add_parser("edit", help="queue an edit of a job's image from an instruction")
    edit.add_argument("job_id", type=arguments.job_id, metavar="ID")
    edit.add_argument("instruction", help='what to change, e.g. "make it night"')
    edit.add_argument("--model", help="a model that edits (default: the job's model)")
    _add_settings(edit)
    edit.set_defaults(run=with_queue(_edit))

    submit = commands.choices["submit"]
    submit.add_argument(
        "--edit-image", type=Path, action="append", default=[], metavar="PNG",
        help="edit this picture as the prompt instructs (a model that edits: Flux.1 Kontext, "
        "Qwen-Image-Edit); again for each further input image (Qwen-Image-Edit Plus: up to 3)",
    )  # fmt: skip
    plain: Callable[[argparse.Namespace], int] = submit.get_default("run")
    edit_run = with_queue(_submit_edit)
    # Unset until the run: an edit takes its model's own steps and cfg, a drawing submit's.
    submit.set_defaults(steps=None, cfg=None)
    submit.set_defaults(
        run=lambda args: edit_run(args) if args.edit_image else plain(_drawing_defaults(args))
    )


def _add_settings(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--image", type=Path, action="append", default=[], metavar="PNG",
        help="another input image (for models that read several)",
    )  # fmt: skip
    parser.add_argument(
        "--steps", type=int, action=Given,
        help="default: the model's own for an edit (Flux.1 Kontext 28, Qwen-Image-Edit 50)",
    )  # fmt: skip
    parser.add_argument(
        "--cfg", type=float, action=Given,
        help="guidance; default: the model's own (Flux.1 Kontext 3.5, Qwen-Image-Edit 4)",
    )  # fmt: skip
    parser.add_argument("--seed", type=int, default=RANDOM_SEED)


def _edit(args: argparse.Namespace, queue: JobQueue) -> int:
    """An edit of job `job_id`'s picture, at its size: a child of that job."""
    more = [_read_input_image(path, number) for number, path in enumerate(args.image, start=2)]
    job = edit_job(
        queue, args.job_id, _settings(args, args.instruction, more), check=check_model,
        defaults=_defaults(), max_attempts=_attempts(),
    )  # fmt: skip
    return _submitted(queue, job, args)


def _submit_edit(args: argparse.Namespace, queue: JobQueue) -> int:
    """`submit --edit-image X.png`: an edit of a picture, stored with the job."""
    if args.init_image is not None or getattr(args, "mask", None) is not None:
        raise InvalidParameters(
            "--edit-image is the picture edited: give no --init-image or --mask"
        )
    size = parse_size(args.size) if args.size else None  # default: the picture's own
    edited, *more = [
        _read_input_image(path, number, size if number == 1 else None)
        for number, path in enumerate(args.edit_image, start=1)
    ]
    job = picture_edit_job(
        edited, _settings(args, args.prompt, more), size=size, parents=args.after,
        check=check_model, defaults=_defaults(), max_attempts=_attempts(),
    )  # fmt: skip
    return _submitted(queue, job, args)


def _read_input_image(path: Path, number: int, size: tuple[int, int] | None = None) -> bytes:
    """The bytes of input image `number` (1: the picture edited), checked as submit will
    prepare it (at `size`, or its own fitted size), so that a refusal names the picture by
    its number and its file ("input image 2 (hat.txt) is not an image that can be read: ...")
    rather than as an init image."""
    try:
        data = read_init_image(path)
        prepare_init_image(data, size)
    except InvalidInitImage as error:
        named = f"input image {number} ({path})"
        said = str(error).replace(f"the init image {path}", named, 1)
        raise InvalidInitImage(said.replace("the init image", named, 1)) from error
    return data


def _drawing_defaults(args: argparse.Namespace) -> argparse.Namespace:
    """`submit`'s own steps and cfg where a drawing (not an edit) gives none."""
    if args.steps is None:
        args.steps = GenerationParams.steps
    if args.cfg is None:
        args.cfg = GenerationParams.cfg
    return args


def _settings(args: argparse.Namespace, instruction: str, more: list[bytes]) -> EditSettings:
    return EditSettings(
        instruction, model=args.model or "", steps=args.steps, cfg=args.cfg, seed=args.seed,
        more_images=more,
    )  # fmt: skip


def _defaults() -> DefaultsOf:
    """Each model's own steps and cfg for an edit (names only on a shared queue)."""
    search = load_settings().model_search_path()
    return edit_defaults_of(search, names_only=queue_is_shared())


def _attempts() -> int:
    return load_settings().max_attempts


def _submitted(queue: JobQueue, job: NewJob, args: argparse.Namespace) -> int:
    """Stores `job`, a few-step LoRA's settings (a Qwen-Image-Edit Lightning LoRA's) in
    what the command line did not give, checked again when they changed it."""
    params = few_step_defaults(args, job.params)
    if params != job.params:
        check_model(params)
        job = replace(job, params=params)
    [job_id] = submit_with_follow_ups(queue, job, source="cli").jobs
    print(job_id)
    return 0
