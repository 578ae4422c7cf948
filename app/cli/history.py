"""History commands: star, prune, move, stats."""

from __future__ import annotations

import argparse

from app.cli.jobs import job_line, with_queue
from app.engine import paths
from app.engine.history.favourites import star
from app.engine.history.retention import RetentionRule, prune, rule_from_settings
from app.engine.history.search import parse_duration
from app.engine.queue import JobQueue, OpenFor, Placement
from app.engine.settings import load_settings


def add_commands(commands: argparse._SubParsersAction) -> None:
    starring = commands.add_parser("star", help="mark a job as a favourite (never pruned)")
    starring.add_argument("job_id", type=int, metavar="ID")
    starring.add_argument("--off", action="store_true", help="remove the star")
    starring.set_defaults(run=with_queue(_star))

    pruning = commands.add_parser(
        "prune", help="remove old finished jobs (default: as the settings say)"
    )
    pruning.add_argument("--older-than", metavar="AGE", help="finished more than AGE ago (30d)")
    pruning.add_argument("--keep", type=_count, metavar="N", help="keep the newest N finished jobs")
    pruning.add_argument("--dry-run", action="store_true", help="only say what would go")
    pruning.add_argument("--images", action="store_true", help="remove their images too")
    pruning.set_defaults(run=_prune)

    moving = commands.add_parser(
        "move", help="move a queued job to the top, bottom or before another"
    )
    moving.add_argument("job_id", type=int, metavar="ID")
    where = moving.add_mutually_exclusive_group(required=True)
    where.add_argument("--top", dest="to", action="store_const", const=Placement.TOP)
    where.add_argument("--bottom", dest="to", action="store_const", const=Placement.BOTTOM)
    where.add_argument("--before", type=int, metavar="M", help="just before job M")
    moving.set_defaults(run=with_queue(_move))


def _star(args: argparse.Namespace, queue: JobQueue) -> int:
    image = star(queue, args.job_id, on=not args.off)
    print(job_line(queue.get(args.job_id)) + (f"  ({image})" if image else ""))
    return 0


def _move(args: argparse.Namespace, queue: JobQueue) -> int:
    queue.move(args.job_id, to=args.to, before=args.before)
    print(job_line(queue.get(args.job_id)))
    return 0


def _prune(args: argparse.Namespace) -> int:
    purpose = OpenFor.READING if args.dry_run else OpenFor.REQUESTS
    return with_queue(_prune_queue, purpose)(args)


def _prune_queue(args: argparse.Namespace, queue: JobQueue) -> int:
    rule = RetentionRule(
        older_than_s=parse_duration(args.older_than) if args.older_than else None,
        keep=args.keep,
    )
    if rule.keeps_everything:
        rule = rule_from_settings(load_settings())
    if rule.keeps_everything:
        print("nothing to prune: the settings keep every job (give --older-than or --keep)")
        return 0
    report = prune(
        queue, rule, checkpoints_dir=paths.checkpoints_dir(), images=args.images,
        dry_run=args.dry_run,
    )  # fmt: skip
    for line in report.lines():
        print(line)
    return 0


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 0 or more")
    return int(text)
