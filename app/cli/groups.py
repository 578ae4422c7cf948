"""Groups on the command line: batches and wildcards on `submit`, and `group` actions."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from app.cli import arguments, inpaint
from app.cli.graph import add_img2img_arguments, request_from_args
from app.cli.jobs import add_generation_arguments, check_model, job_line, with_queue
from app.cli.terminal import printable
from app.engine import paths
from app.engine.jobs.follow_ups import NewJob, submit_with_follow_ups
from app.engine.jobs.grid_spec import AXIS_NAMES, LABELS, GridAxisRefused, describe, spec_from_axes
from app.engine.jobs.groups import (
    GroupAction,
    SeedMode,
    act_on_group,
    group_info,
    newest_members,
    retry_member,
    submit_dynamic,
    submit_grid,
)
from app.engine.jobs.params import MAX_SEED, RANDOM_SEED, InvalidParameters
from app.engine.jobs.queue import JobQueue
from app.engine.jobs.run_inputs import RunInputs
from app.engine.jobs.wildcards import check_template, has_dynamic_syntax
from app.engine.settings import load_settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    submit = commands.choices["submit"]
    add_group_arguments(submit)
    submit.set_defaults(run=with_queue(_submit))

    group = commands.add_parser("group", help="a batch or grid: show it, or act on all of it")
    actions = group.add_subparsers(dest="group_command", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="the group's jobs, cell by cell")
    show.add_argument("group_id", type=arguments.job_id, metavar="GROUP")
    show.set_defaults(run=with_queue(_show))
    for action in GroupAction:
        sub = actions.add_parser(action.value, help=f"{action.value} every job of the group")
        sub.add_argument("group_id", type=arguments.job_id, metavar="GROUP")
        sub.set_defaults(run=with_queue(_acting(action)))

    grid = commands.add_parser(
        "grid", help="queue an X/Y/Z plot: one job per cell and the grid that composes them"
    )
    add_generation_arguments(grid)
    add_img2img_arguments(grid)
    for letter in AXIS_NAMES:
        grid.add_argument(
            f"--{letter}", metavar="NAME=V1,V2,...",
            help=f"the {letter.upper()} axis, one of: {', '.join(LABELS)}"
            + (" (required)" if letter == "x" else ""),
        )  # fmt: skip
    grid.add_argument("--wildcards", type=Path, metavar="DIR",
                      help="folder of __name__ files (default: <data>/wildcards)")  # fmt: skip
    grid.set_defaults(run=with_queue(_grid))

    retry = commands.choices["retry"]  # a cancelled cell of a group is re-run into its cell
    retry.set_defaults(run=with_queue(_retry))


def add_group_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("batches and dynamic prompts")
    group.add_argument("--batch-count", type=arguments.at_least_one, default=1, metavar="N",
                       help="queue N jobs as one group")  # fmt: skip
    group.add_argument(
        "--seed-mode", type=SeedMode, choices=list(SeedMode), default=None,
        help="seeds of a batch: random (each its own), fixed (all --seed), increment "
        "(--seed, --seed + 1, ...); default: increment with --seed, else random",
    )  # fmt: skip
    group.add_argument("--variation-seed", type=int, default=RANDOM_SEED,
                       help="A1111's variation seed (-1: random)")  # fmt: skip
    group.add_argument("--variation-strength", type=float, default=0.0,
                       help="how far towards the variation seed's noise, 0 to 1")  # fmt: skip
    group.add_argument("--wildcards", type=Path, metavar="DIR",
                       help="folder of __name__ files (default: <data>/wildcards)")  # fmt: skip
    group.add_argument("--combinatorial", action="store_true",
                       help="{a|b} choices and wildcards: one job per combination")  # fmt: skip


def _submit(args: argparse.Namespace, queue: JobQueue) -> int:
    if inpaint.asks_for_inputs(args):  # one job with stored inputs (`inpaint` extends submit)
        batched = args.batch_count != 1 or args.combinatorial or args.variation_strength > 0
        if batched or has_dynamic_syntax(args.prompt):
            raise InvalidParameters(
                "--mask, --control and --reference make one job: they cannot be combined "
                "with --batch-count, --combinatorial, a variation seed or a wildcard prompt"
            )
        return inpaint.submit_with_inputs(args, queue)
    params, init_png = request_from_args(args)
    params = replace(
        params, variation_seed=args.variation_seed, variation_strength=args.variation_strength
    ).validated()
    if not 0 <= args.variation_seed <= MAX_SEED and args.variation_seed != RANDOM_SEED:
        raise InvalidParameters(f"variation seed must be -1 or between 0 and {MAX_SEED}")
    folder = args.wildcards or paths.wildcards_dir()
    dynamic = has_dynamic_syntax(params.prompt)
    if dynamic:
        check_template(params.prompt, folder)  # a missing file or a loop: refused now
    attempts = load_settings().max_attempts
    if args.batch_count == 1 and not args.combinatorial and not dynamic:
        inputs = RunInputs(init_image=init_png)
        job = NewJob(params, parents=args.after, inputs=inputs, max_attempts=attempts)
        [job_id] = submit_with_follow_ups(queue, job, source="cli", check=check_model).jobs
        print(job_id)
        return 0
    mode = args.seed_mode or (SeedMode.RANDOM if params.seed == RANDOM_SEED else SeedMode.INCREMENT)
    made = submit_dynamic(
        queue, params, args.batch_count, mode, folder, combinatorial=args.combinatorial,
        init_png=init_png, parents=args.after, max_attempts=attempts, source="cli",
        check=check_model,
    )  # fmt: skip
    for job_id in made.jobs:
        print(job_id)
    print(f"group {made.group_id}: {len(made.jobs)} jobs", file=sys.stderr)
    return 0


def _grid(args: argparse.Namespace, queue: JobQueue) -> int:
    axes = [(letter, getattr(args, letter)) for letter in AXIS_NAMES if getattr(args, letter)]
    if not axes or axes[0][0] != "x":
        raise GridAxisRefused("a grid needs an X axis (--x NAME=V1,V2,...), then --y and --z")
    spec = spec_from_axes(axes)
    params, init_png = request_from_args(args)
    folder = args.wildcards or paths.wildcards_dir()
    if has_dynamic_syntax(params.prompt):
        check_template(params.prompt, folder)
    made = submit_grid(
        queue, params, spec, wildcards=folder, init_png=init_png,
        max_attempts=load_settings().max_attempts, source="cli", check=check_model,
    )  # fmt: skip
    for job_id in made.jobs:
        print(job_id)
    print(made.composer)
    print(f"group {made.group_id}: {len(made.jobs)} cells ({describe(spec)}) and grid job "
          f"{made.composer}", file=sys.stderr)  # fmt: skip
    return 0


def _show(args: argparse.Namespace, queue: JobQueue) -> int:
    info = group_info(queue, args.group_id)
    print(f"group {info.group_id} ({info.kind}): {printable(info.label)}")
    newest = {job.id for job in newest_members(info)}
    for job in info.members:
        cell = "grid" if job.group_cell is None else f"#{job.group_cell}"
        old = "" if job.id in newest else "  (replaced)"
        print(f"  {cell:>5} {job_line(job)}{old}")
    return 0


def _acting(action: GroupAction):  # type: ignore[no-untyped-def]
    def run(args: argparse.Namespace, queue: JobQueue) -> int:
        moved = act_on_group(queue, args.group_id, action, source="cli")
        for record in moved:
            print(f"{record.job_id}: {record.from_status} -> {record.to_status}")
        if not moved:
            print(f"nothing in group {args.group_id} to {action.value}", file=sys.stderr)
        return 0

    return run


def _retry(args: argparse.Namespace, queue: JobQueue) -> int:
    job_id = retry_member(queue, args.job_id, source="cli")
    if job_id != args.job_id:
        print(f"job {args.job_id} was {queue.get(args.job_id).status}; re-ran it in its cell",
              file=sys.stderr)  # fmt: skip
    print(job_line(queue.get(job_id)))
    return 0
