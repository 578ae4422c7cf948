"""What the window needs from the engine, as small interfaces handed in (tests pass fakes).

The real worker supervisor, recovery and model listing are adapted to these in
`app.ui.wiring`; tests hand in fakes. Nothing here imports Qt or torch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from app.engine.workers.messages import WorkerMessage
from app.ui.presenters.i18n import translate
from app.ui.presenters.model_choices import LoraChoice, ModelChoice


class WorkerPool(Protocol):
    """The worker processes (`app.engine.workers.supervisor.Supervisor` fits as it is).

    `poll` must never block: the GUI calls it from a timer. `start` returns nothing used.
    Other programs (a second window, a headless worker) may run jobs on the same queue:
    the pool speaks only for the jobs its own workers hold.
    """

    def start(self) -> object: ...

    def poll(self) -> Sequence[WorkerMessage]: ...

    def own_running_ids(self) -> Sequence[int]:
        """The running jobs this pool's workers hold: the ones a quit would pause."""
        ...

    def shutdown(self, timeout: float) -> Sequence[int]:
        """Pause running jobs (they keep their checkpoints) and stop the workers; the ids of
        the jobs it paused."""
        ...


class NoWorkers:
    """No generation at all (the worker service could not start); the queue still works."""

    def start(self) -> None:
        pass

    def poll(self) -> Sequence[WorkerMessage]:
        return ()

    def own_running_ids(self) -> Sequence[int]:
        return ()

    def shutdown(self, timeout: float) -> Sequence[int]:
        return ()


@dataclass(frozen=True)
class LaunchWait:
    """Launch recovery could not run yet, for a reason that passes (a full disk, the shared
    queue's server away): the window shows `text` and calls recovery again, waiting."""

    text: str


@dataclass(frozen=True)
class RestoreSummary:
    """What the launch-time recovery did to jobs an earlier run left behind."""

    requeued: tuple[int, ...] = ()
    paused: tuple[int, ...] = ()
    cancelled: tuple[int, ...] = ()
    given_up: tuple[int, ...] = ()
    problems: tuple[str, ...] = field(default=())
    # Paused by their own workers when the window that started them was killed (also in
    # `paused`, so "Resume all" takes them), and jobs whose worker still outlives it.
    window_gone: tuple[int, ...] = ()
    still_running: tuple[int, ...] = ()

    @property
    def job_ids(self) -> tuple[int, ...]:
        return (*self.requeued, *self.paused, *self.cancelled, *self.given_up,
                *self.still_running)  # fmt: skip

    def __bool__(self) -> bool:
        return bool(self.job_ids or self.problems)

    def describe(self) -> str:
        parts = [
            label.format(n=len(ids))
            for ids, label in (
                (self.requeued, translate("RestoreSummary", "{n} requeued")),
                (
                    [i for i in self.paused if i not in self.window_gone],
                    translate("RestoreSummary", "{n} paused"),
                ),
                (self.cancelled, translate("RestoreSummary", "{n} cancelled")),
                (self.given_up, translate("RestoreSummary", "{n} given up")),
            )
            if ids
        ]
        text = (
            translate("RestoreSummary", "Restored jobs from the last session: {jobs}").format(
                jobs=translate("RestoreSummary", ", ").join(parts)
            )
            if parts
            else ""
        )
        if self.window_gone:
            n = len(self.window_gone)
            gone = (
                translate(
                    "RestoreSummary", "The worker of 1 job paused it when the window was gone"
                )
                if n == 1
                else translate(
                    "RestoreSummary", "The workers of {n} jobs paused them when the window was gone"
                ).format(n=n)
            )
            text = "; ".join(filter(None, [text, gone]))
        if self.still_running:
            outlived = translate(
                "RestoreSummary",
                "{n} still held by a worker of the closed window: it pauses at its next step",
            ).format(n=len(self.still_running))
            text = "; ".join(filter(None, [text, outlived]))
        if self.problems:
            text = "; ".join(filter(None, [text, *self.problems]))
        return text


ListModels = Callable[[], list[ModelChoice]]
# LoRA files (a bare name: one with no preview or size known).
ListLoras = Callable[[], Sequence[LoraChoice | str]]


def no_loras() -> list[LoraChoice | str]:
    return []
