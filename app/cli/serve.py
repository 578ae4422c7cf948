"""`python -m app serve`: the queue over HTTP (app/server), with a supervised worker."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from app.cli.jobs import with_queue
from app.engine.api_access import host_name_problem
from app.engine.jobs.queue import JobQueue
from app.engine.logs import configure_logging, log_path
from app.engine.settings import DB_ENV, load_settings
from app.engine.store.opening import OpenFor, open_queue
from app.engine.workers.headless import WorkerCannotStart
from app.engine.workers.worker import WorkerConfig, database_file
from app.engine.workers.worker_states import StartedBy
from app.errors import BadInput
from app.server.state import MAX_IN_FLIGHT, Limits

EXIT_FAILED = 1


def add_commands(commands: argparse._SubParsersAction) -> None:
    serve = commands.add_parser(
        "serve", help="serve the queue over HTTP (/api/v1, and A1111's /sdapi/v1) with a worker"
    )
    serve.add_argument("--host", default="127.0.0.1",
                       help="address to listen on (default 127.0.0.1: this computer only; "
                       "any other needs a token)")  # fmt: skip
    serve.add_argument("--port", type=int, default=7860, help="port (default 7860, as A1111)")
    serve.add_argument("--token", help="the token clients must send (default: the stored one "
                       "for a non-loopback address; see --new-token)")  # fmt: skip
    serve.add_argument(
        "--new-token",
        action="store_true",
        help="make and store a new token (mode 0600), print it and use it",
    )
    serve.add_argument(
        "--allow-host", action="append", default=[], metavar="NAME",
        help="also answer to this host name (a reverse proxy's, this computer's on the "
        "network); others get 421. Repeatable; Settings add more",
    )  # fmt: skip
    serve.add_argument(
        "--require-token", action="store_true",
        help="want the token even on 127.0.0.1 (the stored one, made if there is none)",
    )  # fmt: skip
    serve.add_argument(
        "--a1111-without-token", action="store_true",
        help="let /sdapi clients that cannot send the token in without it (127.0.0.1 only)",
    )  # fmt: skip
    serve.add_argument(
        "--cors",
        action="append",
        default=[],
        metavar="ORIGIN",
        help="let browser pages from ORIGIN call the API (default: none)",
    )
    serve.add_argument(
        "--max-in-flight", type=int, default=MAX_IN_FLIGHT, metavar="N",
        help=f"requests served at once; more get 503 (default {MAX_IN_FLIGHT})",
    )  # fmt: skip
    serve.add_argument(
        "--allow-private-callbacks", action="store_true",
        help="let jobs' callback URLs reach loopback, link-local and private addresses "
        "(default: public addresses only; Settings: allow_private_callbacks)",
    )  # fmt: skip
    serve.add_argument(
        "--show-callback-secret", action="store_true",
        help="print the secret this queue signs callbacks with (X-Easel-Signature), making "
        "it if there is none, and exit",
    )  # fmt: skip
    serve.add_argument(
        "--no-workers",
        action="store_true",
        help="run no worker here (other processes or machines run the jobs)",
    )
    serve.add_argument(
        "--db", metavar="URL", default=argparse.SUPPRESS,
        help=f"job database: a postgresql:// URL, or a SQLite file (overrides ${DB_ENV})",
    )  # fmt: skip
    serve.set_defaults(run=with_queue(_serve))  # `main` sets $EASEL_DB from --db, here too


def _serve(args: argparse.Namespace, queue: JobQueue) -> int:
    from app.engine.jobs.api_jobs import callback_secret
    from app.server.run import ServeOptions, serve
    from app.server.security import new_token, token_for, token_path

    if args.show_callback_secret:
        print(callback_secret(queue.db)[0])
        return 0
    if not 0 < args.port < 65536:
        raise BadInput(f"--port must be between 1 and 65535, not {args.port}")
    log_file = configure_logging("server", echo=True)
    given = args.token
    if args.new_token:
        given = new_token()
        print(f"new token stored in {token_path()}: {given}", file=sys.stderr)
    token = token_for(args.host, given, required=args.require_token)
    settings = load_settings()
    if args.allow_private_callbacks:
        settings = replace(settings, allow_private_callbacks=True)
    if args.max_in_flight < 1:
        raise BadInput(f"--max-in-flight must be at least 1, not {args.max_in_flight}")
    if problems := [p for name in args.allow_host if (p := host_name_problem(name))]:
        raise BadInput(f"--allow-host: {problems[0]}")
    limits = Limits(max_in_flight=args.max_in_flight)
    options = ServeOptions(
        args.host, args.port, token, tuple(args.cors), limits,
        allowed_hosts=(*settings.api_allowed_hosts, *args.allow_host),
        a1111_without_token=args.a1111_without_token,
    )  # fmt: skip
    workers = None
    if not args.no_workers:
        worker_queue = open_queue(purpose=OpenFor.HEADLESS)
        config = WorkerConfig.from_settings(
            settings, database_file(worker_queue), started_by=StartedBy.SERVER
        )
        workers = (worker_queue, config)

    secret, made = callback_secret(queue.db)
    if made:  # shown this once; --show-callback-secret prints it again
        print(f"made this queue's callback signing secret (receivers check X-Easel-Signature "
              f"with it; `serve --show-callback-secret` prints it again): {secret}",
              file=sys.stderr)  # fmt: skip

    def ready(address: str) -> None:
        where = "" if token is None else " (token required)"
        print(f"serving on {address}{where}; API docs at {address}/docs", flush=True)

    try:
        serve(queue, settings, options, workers=workers, on_ready=ready, log_file=str(log_file),
              callback_secret=secret)  # fmt: skip
    except WorkerCannotStart as error:
        print(f"error: {error} (see {log_path('worker-0')})", file=sys.stderr)
        return EXIT_FAILED
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        if workers is not None:
            workers[0].db.dispose()
    return 0
