"""`python -m app workers [--json]` and `workers drain|stop NAME|ID`, as a user types them."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.engine.store.opening import OpenFor, open_queue
from app.engine.workers.presence import Presence
from app.engine.workers.worker_states import WorkerRequest, WorkerState

GPU = "gpu-box:77:cafe"


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def register(worker_id: str, machine: str, state: WorkerState) -> Presence:
    queue = open_queue(purpose=OpenFor.REQUESTS)  # the user's store, as the commands open it
    presence = Presence(queue.db, worker_id, machine)
    presence.register(device="cuda/float16")
    presence.update(state, model="easel-tiny", jobs_done=3)
    return presence


def test_workers_lists_them_and_drain_reaches_the_named_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    gpu = register(GPU, "gpu-box", WorkerState.IDLE)
    register("laptop:12:beef", "laptop", WorkerState.EXITED)
    code, out, _ = run_cli(capsys, "workers")
    assert code == 0
    first, second = out.splitlines()
    assert first.split()[:2] == ["gpu-box", "idle"] and GPU in first and "3 done" in first
    assert second.split()[:2] == ["laptop", "exited"]
    code, out, _ = run_cli(capsys, "workers", "--json")
    listed = json.loads(out)
    assert [(w["machine"], w["state"], w["device"]) for w in listed] == [
        ("gpu-box", "idle", "cuda/float16"), ("laptop", "exited", "cuda/float16")
    ]  # fmt: skip
    code, out, _ = run_cli(capsys, "workers", "drain", "gpu-box")
    assert (code, out) == (0, f"{GPU}: drain asked\n")
    assert gpu.beat(WorkerState.IDLE) == (WorkerRequest.DRAIN, "the command line")


def test_a_bad_name_is_one_line_and_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    register("laptop:12:beef", "laptop", WorkerState.EXITED)
    code, out, err = run_cli(capsys, "workers", "stop", "nobody")
    assert (code, out) == (2, "")
    assert err.startswith("error: no worker is called 'nobody'") and err.count("\n") == 1
    code, _, err = run_cli(capsys, "workers", "stop", "laptop")
    assert code == 2 and err == "error: worker 'laptop' has exited: there is nothing to ask of it\n"
