"""History commands: star, prune, move, stats, eta."""

from __future__ import annotations

import argparse
import json

from app.cli import arguments
from app.cli.jobs import job_line, with_queue
from app.engine import paths
from app.engine.history.eta import duration_words, job_estimate, learned, queue_estimate
from app.engine.history.favourites import star
from app.engine.history.retention import RetentionRule, prune, rule_from_settings
from app.engine.history.search import parse_duration
from app.engine.history.stats import history_stats
from app.engine.jobs.queue import JobQueue, Placement
from app.engine.jobs.states import JobStatus
from app.engine.settings import load_settings
from app.engine.store.opening import OpenFor

RUNNING = [status for status in JobStatus if status.is_running]


def add_commands(commands: argparse._SubParsersAction) -> None:
    starring = commands.add_parser("star", help="mark a job as a favourite (never pruned)")
    starring.add_argument("job_id", type=arguments.job_id, metavar="ID")
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
    moving.add_argument("job_id", type=arguments.job_id, metavar="ID")
    where = moving.add_mutually_exclusive_group(required=True)
    where.add_argument("--top", dest="to", action="store_const", const=Placement.TOP)
    where.add_argument("--bottom", dest="to", action="store_const", const=Placement.BOTTOM)
    where.add_argument("--before", type=arguments.job_id, metavar="M", help="just before job M")
    moving.set_defaults(run=with_queue(_move))

    stats = commands.add_parser("stats", help="what happened to the jobs of a period")
    stats.add_argument("--since", default="30d", metavar="AGE",
                       help="jobs submitted in the last AGE (default 30d)")  # fmt: skip
    stats.add_argument("--json", action="store_true", help="one JSON object, for scripts")
    stats.set_defaults(run=with_queue(_stats, OpenFor.READING))

    eta = commands.add_parser("eta", help="how long the queued jobs will take, learned")
    eta.set_defaults(run=with_queue(_eta, OpenFor.READING))


def _star(args: argparse.Namespace, queue: JobQueue) -> int:
    image = star(queue, args.job_id, on=not args.off)
    print(job_line(queue.get(args.job_id)) + (f"  ({image})" if image else ""))
    return 0


def _move(args: argparse.Namespace, queue: JobQueue) -> int:
    queue.move(args.job_id, to=args.to, before=args.before)
    print(job_line(queue.get(args.job_id)))
    return 0


def _stats(args: argparse.Namespace, queue: JobQueue) -> int:
    now = queue.clock()
    report = history_stats(queue, now - parse_duration(args.since), now)
    if args.json:
        print(json.dumps(report.as_dict(), indent=1))
    for line in [] if args.json else report.lines():
        print(line)
    return 0


def _eta(_args: argparse.Namespace, queue: JobQueue) -> int:
    estimator = learned(queue)
    waiting = queue.jobs([JobStatus.PENDING, *RUNNING], limit=None)
    held = queue.models_held()  # a queued job for a model nobody holds expects its load
    for job in waiting:
        seconds = job_estimate(estimator, job, held=held)
        loaded = "" if JobStatus(job.status).is_running else _model_words(job.model, held)
        about = f"  (about {duration_words(seconds)})" if seconds else ""
        print(job_line(job) + about + loaded)
    workers = load_settings().workers
    print(queue_estimate(estimator, waiting, workers=workers, held=held).line())
    return 0


def _model_words(model: str, held: dict[str, list[str]]) -> str:
    holders = held.get(model)
    return f"  [{model} loaded on {', '.join(holders)}]" if holders else f"  [{model}: to load]"


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
