"""The HTTP server under load and faults (issue 22).

    .venv/bin/python benchmarks/server.py [--jobs 100000] [--pollers 100] [--quick]
        [--only load|kills|sequential|overhead|hires ...]

Prints, each measured against a real `python -m app serve` on a loopback port:
- submit_p99_ms: POST /api/v1/jobs, 8 clients at once (no worker: the queue only grows)
- status_p99_ms: GET /api/v1/jobs/<id> from 100 concurrent pollers over 100,000 jobs
- events_lag_p99_ms: a transition's commit (fired by another process's queue) to its event
  received on /api/v1/events
- duplicate_jobs: jobs beyond one per Idempotency-Key, when every submit is sent several
  times (at once, and again after a client timeout cut it off)
- lost_jobs: submits the server acknowledged that are not in the store after it was killed
  with SIGKILL again and again mid-traffic (and restarted)
- server_overhead_ratio: jobs per second of one worker when its jobs come through the API
  (`serve` with its worker) over the same when they come from the command line
  (`python -m app submit`, then `python -m app worker --until-idle`): from the timelines,
  the median time from one COMPLETE to the next in a round, API over CLI for each pair of
  rounds run back to back, and the median over the pairs (--rounds, --round-jobs); the
  API's client polls its last job five times a second, as a script would
- server_overhead_ratio_rounds: each pair's ratio, to show their spread
- a1111_hires_overhead_ratio: the same for A1111's hires fix: `txt2img` requests with
  `enable_hr` (all sent at once, each waiting for its answer) over the same chains from the
  command line (`python -m app submit`, `python -m app upscale` of each, then `python -m app
  worker --until-idle`): each a first pass and its upscale job, the worker's COMPLETE to
  COMPLETE times compared as above
- a1111_hires_overhead_ratio_rounds: each pair's ratio (the door that goes first
  alternates from pair to pair)
- a1111_hires_handoff_ms, a1111_hires_run_ms: where each door's cycles go, the medians over
  every pair: the hand-off (a COMPLETE to the next START: the settle, a child's unblock, the
  claim) and the run (START to COMPLETE). Every job of a round is stored before its worker's
  first claim (checked), so no submit overlaps a timed cycle in either door
- sequential_txt2img_ms: the median time of one A1111 txt2img of that job, when a client
  sends one after another (each waits for the previous answer, so the worker is idle when
  the next arrives: what it costs to start a job, not to queue one)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import multiprocessing
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from sqlalchemy import func, insert, select

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.queue import JobQueue
from app.models.opening import open_database
from app.models.tables import JOB, REQUEST_KEY, TRANSITION

REPO = Path(__file__).resolve().parents[1]
TINY = {"steps": 4, "width": 64, "height": 64, "seed": 1}


def p99(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(home: Path, port: int, *args: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "EASEL_HOME": str(home)}
    process = subprocess.Popen(
        [sys.executable, "-m", "app", "serve", "--port", str(port), *args],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return process
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the server exited with {process.returncode}") from None
            time.sleep(0.05)
    raise RuntimeError("the server did not start")


@contextmanager
def server(home: Path, *args: str) -> Iterator[str]:
    port = free_port()
    process = start_server(home, port, *args)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()


def store(home: Path) -> JobQueue:
    return JobQueue(open_database(str(home / "easel.db")))


# --- submit and status ------------------------------------------------------------------------


def submit_latencies(url: str, count: int, clients: int = 8) -> list[float]:
    latencies: list[float] = []

    def client(n: int) -> None:
        with httpx.Client(base_url=url, timeout=60) as http:
            for i in range(n):
                began = time.perf_counter()
                answer = http.post("/api/v1/jobs", json={"prompt": f"bench {i}", **TINY})
                latencies.append((time.perf_counter() - began) * 1000)
                answer.raise_for_status()

    threads = [threading.Thread(target=client, args=(count // clients,)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies


def bulk_jobs(home: Path, total: int) -> None:
    """`total` stored jobs, fast: one multi-row insert per 5000, as a long history looks."""
    queue = store(home)
    queue.submit(GenerationParams("seed the schema"))
    now = time.time()
    row = {**GenerationParams("a lighthouse, oil", seed=3).to_dict(), "status": "SUCCESS",
           "version": 3, "attempt": 1, "max_attempts": 3, "given_up": False, "priority": 0,
           "progress_step": 20, "progress_total": 20, "created_at": now, "updated_at": now,
           "starred": False}  # fmt: skip
    with queue.db.write() as conn:
        for start in range(0, total, 5000):
            conn.execute(insert(JOB), [row] * min(5000, total - start))
    queue.db.dispose()


def status_latencies(url: str, ids: int, pollers: int, duration_s: float) -> list[float]:
    """`pollers` clients in processes of 10 each: one asyncio client with 100 connections
    measures its own connection pool more than the server."""
    processes = max(1, pollers // 10)
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        parts = pool.starmap(
            _poll_in_process, [(url, ids, pollers // processes, duration_s)] * processes
        )
    return [latency for part in parts for latency in part]


def _poll_in_process(url: str, ids: int, pollers: int, duration_s: float) -> list[float]:
    return asyncio.run(_poll(url, ids, pollers, duration_s))


async def _poll(url: str, ids: int, pollers: int, duration_s: float) -> list[float]:
    latencies: list[float] = []
    limits = httpx.Limits(max_connections=pollers)
    async with httpx.AsyncClient(base_url=url, timeout=60, limits=limits) as http:
        deadline = time.perf_counter() + duration_s

        async def poll() -> None:
            while time.perf_counter() < deadline:
                began = time.perf_counter()
                answer = await http.get(f"/api/v1/jobs/{random.randint(2, ids)}")
                latencies.append((time.perf_counter() - began) * 1000)
                answer.raise_for_status()

        await asyncio.gather(*(poll() for _ in range(pollers)))
    return latencies


# --- events ----------------------------------------------------------------------------------


def event_lags(url: str, home: Path, count: int) -> list[float]:
    queue = store(home)
    ids = queue.submit_many([GenerationParams(f"evented {n}") for n in range(count)])
    start = max(t.id or 0 for t in queue.timeline(ids[-1]))
    committed: dict[int, float] = {}
    received: dict[int, float] = {}
    ready = threading.Event()

    def read() -> None:
        import json

        with (
            httpx.Client(base_url=url, timeout=None) as http,
            http.stream("GET", "/api/v1/events", params={"after": str(start)}) as stream,
        ):
            ready.set()
            for line in stream.iter_lines():
                if line.startswith("data: ") and '"to"' in line:
                    received[json.loads(line[6:])["job_id"]] = time.perf_counter()
                    if len(received) >= count:
                        return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    ready.wait(30)
    time.sleep(0.3)
    for job_id in ids:
        queue.pause(job_id, source="bench")
        committed[job_id] = time.perf_counter()
        time.sleep(random.uniform(0.005, 0.03))
    reader.join(timeout=30)
    queue.db.dispose()
    return [(received[i] - committed[i]) * 1000 for i in ids if i in received]


# --- retried submits and kills ---------------------------------------------------------------


def duplicates(url: str, home: Path, requests: int) -> int:
    """Each request sent three times: twice at once, then once more after a client that
    gave up after 5 ms (its request may or may not have landed)."""

    def send(key: str, timeout: float) -> None:
        try:
            with httpx.Client(base_url=url, timeout=timeout) as http:
                http.post("/api/v1/jobs", json={"prompt": f"retried {key}", **TINY},
                          headers={"Idempotency-Key": key})  # fmt: skip
        except httpx.HTTPError:
            pass

    for n in range(requests):
        key = f"dup-{n}"
        impatient = threading.Thread(target=send, args=(key, 0.005))
        twins = [threading.Thread(target=send, args=(key, 30)) for _ in range(2)]
        for thread in [impatient, *twins]:
            thread.start()
        for thread in [impatient, *twins]:
            thread.join()
        send(key, 30)
    return count_duplicates(home, "retried ")


def count_duplicates(home: Path, prefix: str) -> int:
    queue = store(home)
    query = select(JOB.c.prompt, func.count()).where(JOB.c.prompt.like(f"{prefix}%"))
    with queue.db.read() as conn:
        counts = [n for _prompt, n in conn.execute(query.group_by(JOB.c.prompt))]
    queue.db.dispose()
    return sum(n - 1 for n in counts)


def lost_after_kills(home: Path, requests: int, kills: int) -> tuple[int, int]:
    """Clients submit with keys and retry until answered while the server is SIGKILLed
    and restarted `kills` times. Returns (lost acknowledged jobs, duplicates)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    process = start_server(home, port, "--no-workers")
    acknowledged: dict[str, list[int]] = {}
    stop = threading.Event()

    def client(first: int) -> None:
        with httpx.Client(base_url=url, timeout=5) as http:
            for n in range(first, requests, 4):
                key = f"kill-{n}"
                while not stop.is_set():
                    try:
                        answer = http.post(
                            "/api/v1/jobs", json={"prompt": f"survives {n}", **TINY},
                            headers={"Idempotency-Key": key},
                        )  # fmt: skip
                        if answer.status_code in (200, 201):
                            acknowledged[key] = answer.json()["ids"]
                            break
                    except httpx.HTTPError:
                        pass
                    time.sleep(0.02)

    clients = [threading.Thread(target=client, args=(i,)) for i in range(4)]
    for thread in clients:
        thread.start()
    try:
        for _ in range(kills):
            time.sleep(random.uniform(0.3, 1.0))
            process.send_signal(signal.SIGKILL)
            process.wait()
            process = start_server(home, port, "--no-workers")
        for thread in clients:
            thread.join(timeout=120)
    finally:
        stop.set()
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    queue = store(home)
    with queue.db.read() as conn:
        stored = {int(i) for (i,) in conn.execute(select(JOB.c.id))}
        keys = int(conn.execute(select(func.count()).select_from(REQUEST_KEY)).scalar_one())
    queue.db.dispose()
    lost = sum(1 for ids in acknowledged.values() for i in ids if i not in stored)
    lost += requests - len(acknowledged)  # never answered, even after the restarts
    assert keys >= len(acknowledged)
    return lost, count_duplicates(home, "survives ")


# --- throughput: API vs command line ----------------------------------------------------------


def cycle_times(home: Path) -> list[float]:
    """Seconds from each COMPLETE of the worker to its next: one job's claim and run. The
    first job, which also loads the model, is left out."""
    done = [at for event, _job, at in worker_events(home) if event == "COMPLETE"]
    return [later - earlier for earlier, later in itertools.pairwise(done)]


def worker_events(home: Path) -> list[tuple[str, int, float]]:
    """(event, job, at) of every SUBMIT, START and COMPLETE in the store, in time order."""
    queue = store(home)
    events = ("SUBMIT", "SUBMIT_AFTER", "START", "COMPLETE")
    query = select(TRANSITION.c.event, TRANSITION.c.job_id, TRANSITION.c.at)
    with queue.db.read() as conn:
        rows = conn.execute(query.where(TRANSITION.c.event.in_(events)).order_by(TRANSITION.c.at))
        found = [(str(event), int(job), float(at)) for event, job, at in rows]
    queue.db.dispose()
    return found


def cycle_parts(home: Path) -> tuple[list[float], list[float]]:
    """Each timed cycle split in two: the hand-off (a COMPLETE to the next job's START: the
    settle, a child's unblock and the claim) and the run (START to COMPLETE). Raises if a
    job was submitted after the first claim: its submit would overlap the timed cycles in
    one arm and not in the other."""
    events = worker_events(home)
    first_start = min(at for event, _job, at in events if event == "START")
    if max(at for event, _job, at in events if event.startswith("SUBMIT")) > first_start:
        raise RuntimeError(f"{home.name}: jobs were still being submitted while the worker ran")
    started = {job: at for event, job, at in events if event == "START"}
    completes = [(job, at) for event, job, at in events if event == "COMPLETE"]
    handoffs, runs = [], []
    for (_earlier, done_at), (job, at) in itertools.pairwise(completes):
        handoffs.append(started[job] - done_at)
        runs.append(at - started[job])
    return handoffs, runs


def cli_cycles(home: Path, jobs: int) -> list[float]:
    env = {**os.environ, "EASEL_HOME": str(home)}
    for n in range(jobs):
        subprocess.run(
            [sys.executable, "-m", "app", "submit", f"through the cli {n}", "--steps", "4",
             "--size", "64x64", "--seed", str(n)],
            cwd=REPO, env=env, check=True, capture_output=True,
        )  # fmt: skip
    subprocess.run([sys.executable, "-m", "app", "worker", "--until-idle"], cwd=REPO, env=env,
                   check=True, capture_output=True)  # fmt: skip
    return cycle_times(home)


def api_cycles(home: Path, jobs: int) -> list[float]:
    with server(home) as url, httpx.Client(base_url=url, timeout=60) as http:
        ids = [http.post("/api/v1/jobs", json={"prompt": f"through the api {n}", **TINY,
                                               "seed": n}).json()["ids"][0]
               for n in range(jobs)]  # fmt: skip
        deadline = time.monotonic() + 600
        while http.get(f"/api/v1/jobs/{ids[-1]}").json()["status"] != "SUCCESS":
            if time.monotonic() > deadline:
                raise RuntimeError("the API's jobs did not finish")
            time.sleep(0.2)
    return cycle_times(home)


def sequential_txt2img(home: Path, requests: int) -> list[float]:
    body = {"prompt": "one after another", **TINY, "sampler_name": "Euler"}
    with server(home) as url, httpx.Client(base_url=url, timeout=120) as http:
        http.post("/sdapi/v1/txt2img", json=body).raise_for_status()  # loads the model
        latencies = []
        for n in range(requests):
            began = time.perf_counter()
            http.post("/sdapi/v1/txt2img", json={**body, "seed": n}).raise_for_status()
            latencies.append((time.perf_counter() - began) * 1000)
    return latencies


def overhead_ratios(root: Path, rounds: int, jobs: int) -> tuple[float, list[float]]:
    """Jobs per second through the API over the CLI's, for each pair of rounds run back to
    back, and the median of those. Each round is a fresh worker process, and a process's
    step time drifts by up to a fifth from one to the next on this machine (59 to 74 ms
    for the same job), far more than the API and the CLI differ within a pair: so many
    short pairs, not a few long rounds pooled."""
    each: list[float] = []
    for round_ in range(rounds):
        api_round = api_cycles(root / f"api-{round_}", jobs)
        cli_round = cli_cycles(root / f"cli-{round_}", jobs)
        each.append(statistics.median(cli_round) / statistics.median(api_round))
    return statistics.median(each), each


HIRES = {"enable_hr": True, "hr_scale": 2, "hr_upscaler": "Lanczos", "denoising_strength": 0.5}


def cli_hires_cycles(home: Path, chains: int) -> list[float]:
    env = {**os.environ, "EASEL_HOME": str(home)}

    def cli(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env,
                              check=True, capture_output=True, text=True)  # fmt: skip
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    for n in range(chains):
        parent = cli("submit", f"hires from the cli {n}", "--steps", "4", "--size", "64x64",
                     "--seed", str(n), "--scheduler", "Euler", "--cfg", "7")  # fmt: skip
        cli("upscale", parent, "--scale", "2", "--strength", "0.5")
    cli("worker", "--until-idle")
    return cycle_times(home)


def api_hires_cycles(home: Path, chains: int) -> list[float]:
    with server(home) as url:

        def request(n: int) -> None:
            body = {"prompt": f"hires from the api {n}", **TINY, "seed": n,
                    "sampler_name": "Euler", **HIRES}  # fmt: skip
            httpx.post(f"{url}/sdapi/v1/txt2img", json=body, timeout=600).raise_for_status()

        threads = [threading.Thread(target=request, args=(n,)) for n in range(chains)]
        for thread in threads:
            thread.start()
            time.sleep(0.05)  # in order, as the CLI's chains are queued
        for thread in threads:
            thread.join()
    return cycle_times(home)


@dataclass
class HiresPairs:
    ratios: list[float] = field(default_factory=list)  # CLI over A1111, one per pair
    # Per door ("api", "cli"): every timed cycle's hand-off and run, in seconds.
    handoffs: dict[str, list[float]] = field(default_factory=lambda: {"api": [], "cli": []})
    runs: dict[str, list[float]] = field(default_factory=lambda: {"api": [], "cli": []})


def hires_overhead_ratios(root: Path, rounds: int, chains: int) -> HiresPairs:
    """As `overhead_ratios`, for hires chains (a first pass and its upscale job each). The
    door that goes first alternates from pair to pair: with the A1111 round always first,
    whatever the machine does differently for the second of two worker processes (caches,
    the previous one's exit) counted against one door only."""
    measured = HiresPairs()
    doors = {"api": api_hires_cycles, "cli": cli_hires_cycles}
    for round_ in range(rounds):
        order = ("api", "cli") if round_ % 2 == 0 else ("cli", "api")
        medians = {}
        for door in order:
            home = root / f"hires-{door}-{round_}"
            medians[door] = statistics.median(doors[door](home, chains))
            handoffs, runs = cycle_parts(home)
            measured.handoffs[door] += handoffs
            measured.runs[door] += runs
        measured.ratios.append(medians["cli"] / medians["api"])
    return measured


PARTS = ("load", "kills", "sequential", "overhead", "hires")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs the pollers read")
    parser.add_argument("--pollers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15, help="API/CLI pairs of rounds")
    parser.add_argument("--round-jobs", type=int, default=12, help="jobs in each round")
    parser.add_argument("--quick", action="store_true", help="smaller runs, for a smoke test")
    parser.add_argument("--only", choices=PARTS, action="append",
                        help="run only these parts (repeatable); all by default")  # fmt: skip
    args = parser.parse_args()
    parts = set(args.only or PARTS)
    with tempfile.TemporaryDirectory(prefix="easel-bench-server-") as tmp:
        root = Path(tmp)
        if "load" in parts:
            measure_load(root / "load", args.jobs, args.pollers, args.quick)
        if "kills" in parts:
            measure_kills(root / "kills", args.quick)
        if "sequential" in parts:
            latencies = sequential_txt2img(root / "sequential", 5 if args.quick else 30)
            print(f"sequential_txt2img_ms: {statistics.median(latencies):.1f}", flush=True)
        if "overhead" in parts:
            ratio, each = overhead_ratios(
                root, 1 if args.quick else args.rounds, 6 if args.quick else args.round_jobs
            )  # fmt: skip
            print(f"server_overhead_ratio: {ratio:.3f}", flush=True)
            rounds = " ".join(f"{r:.3f}" for r in each)
            print(f"server_overhead_ratio_rounds: {rounds}", flush=True)
        if "hires" in parts:
            measure_hires(root, 1 if args.quick else args.rounds,
                          3 if args.quick else args.round_jobs // 2)  # fmt: skip


def measure_load(home: Path, jobs: int, pollers: int, quick: bool) -> None:
    """submit_p99_ms, status_p99_ms, events_lag_p99_ms and duplicate_jobs, on one server."""
    ids = 1000 if quick else jobs
    bulk_jobs(home, ids)
    with server(home, "--no-workers", "--max-in-flight", str(2 * pollers)) as url:
        submits = submit_latencies(url, 80 if quick else 800)
        print(f"submit_p99_ms: {p99(submits):.1f}", flush=True)
        polls = status_latencies(url, ids, pollers, 3.0 if quick else 15.0)
        print(f"status_p99_ms: {p99(polls):.1f}", flush=True)
        lags = event_lags(url, home, 40 if quick else 300)
        print(f"events_lag_p99_ms: {p99(lags):.1f}", flush=True)
        print(f"duplicate_jobs: {duplicates(url, home, 10 if quick else 100)}", flush=True)


def measure_hires(root: Path, rounds: int, chains: int) -> None:
    measured = hires_overhead_ratios(root, rounds, chains)
    print(f"a1111_hires_overhead_ratio: {statistics.median(measured.ratios):.3f}", flush=True)
    each = " ".join(f"{r:.3f}" for r in measured.ratios)
    print(f"a1111_hires_overhead_ratio_rounds: {each}", flush=True)
    for name, parts in (("handoff", measured.handoffs), ("run", measured.runs)):
        shown = ", ".join(f"{door} {statistics.median(s) * 1000:.1f}" for door, s in parts.items())
        print(f"a1111_hires_{name}_ms: {shown}", flush=True)


def measure_kills(home: Path, quick: bool) -> None:
    lost, doubled = lost_after_kills(home, 40 if quick else 300, 3 if quick else 10)
    print(f"lost_jobs: {lost}", flush=True)
    print(f"duplicate_jobs_after_kills: {doubled}", flush=True)


if __name__ == "__main__":
    main()
