"""The view-model behind the window: keeps the job list fresh and carries out requests.

Freshness comes from polling the store's cheap change counter (`data_version`) on a
timer, plus worker messages; each refresh reads one small page on the database thread.
Every request runs there too, and its outcome comes back as signals.

A cancel of queued jobs can be undone for `UNDO_MS`: the view-model holds the one offer,
its timer, and finishes or takes it back; the window only shows the banner.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, QTimer, Signal

from app.engine.jobs.params import GenerationParams
from app.engine.jobs.states import JobEvent, JobStatus
from app.ui.itemmodels.job_list_model import JobListModel
from app.ui.presenters.queue_service import (
    PAGE_SIZE,
    CancelOutcome,
    Outcome,
    QueueService,
    Snapshot,
)
from app.ui.presenters.rows import FILTERS, STARRED_ONLY, JobRow, ListFilter
from app.ui.qt.dbthread import Runner
from app.ui.qt.live import LiveProgress
from app.ui.qt.thumbnails import ThumbnailCache

if TYPE_CHECKING:
    from app.engine.jobs.follow_ups import NewJob

log = logging.getLogger(__name__)

BUSY_REFRESH_S = 1.0
SEARCH_LIMIT = 500  # matches shown for a search, newest first (its own page: no paging)
# How long a cancel of queued jobs can be undone: the engine's UNDO_WINDOW_S (not imported:
# the engine's store modules load late, on the database thread; a test keeps them equal).
UNDO_MS = 6000

SETTLED = frozenset({JobStatus.SUCCESS, JobStatus.FAILED, JobStatus.TIMEOUT, JobStatus.CANCELLED})


class JobsViewModel(QObject):
    counts_changed = Signal(dict)  # JobStatus -> int
    refreshed = Signal()
    submitted = Signal(tuple)  # new job ids
    error = Signal(str)
    settled = Signal(object)  # a JobRow that just reached SUCCESS, FAILED, TIMEOUT or CANCELLED
    cancel_held = Signal(object)  # a CancelOutcome: what a cancel did, maybe with an undo
    undo_closed = Signal()  # the undo offer ended: finished, taken back, or replaced
    search_checked = Signal(str)  # "" or why the search text cannot be understood

    def __init__(
        self,
        service: QueueService,
        runner: Runner,
        thumbs: ThumbnailCache,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.service = service
        self.runner = runner
        self.live = LiveProgress(self)
        self.jobs = JobListModel(self.live, thumbs, self._fetch_page, self)
        self.filter_name = ListFilter.ALL
        self.search_text = ""  # words the prompts must contain ("": every job)
        self.counts: dict[JobStatus, int] = {}
        self._version: int | None = None
        self._in_flight = False
        self._again = False
        self._generation = 0  # bumped by a filter change: late pages of the old filter are dropped
        self._known: dict[int, JobStatus] = {}
        self._stale = False
        self.search_problem = ""
        self._counted = False  # the filter buttons show counts from the first refresh on
        self._refreshed_at = 0.0
        # The rows on screen (first, last); the job list view sets this.
        self.visible_rows: Callable[[], tuple[int, int]] = lambda: (0, PAGE_SIZE)
        self.live.settled.connect(lambda _job_id: self.refresh())
        self.jobs.reorder_requested.connect(self.move_before)
        self._held: CancelOutcome | None = None  # queued jobs held for an undo of their cancel
        self._undo_timer = QTimer(self)
        self._undo_timer.setSingleShot(True)
        self._undo_timer.timeout.connect(self.finish_cancel)

    # --- freshness ----------------------------------------------------------------------------

    def tick(self) -> None:
        """Called by a timer: refresh when anybody committed since the last look."""
        try:
            version = self.service.data_version()
        except Exception as error:  # a locked or vanished file must not stop the timer
            log.warning("change counter unavailable: %s", error)
            version = None
        if version is None or version != self._version:
            self._version = version
            self._stale = True
        # While jobs run, most commits are progress rows that worker messages already showed:
        # read the store at most once a second then (starts, ends and requests still refresh
        # at once: worker messages and our own requests call `refresh` directly).
        interval = BUSY_REFRESH_S if self._running() else 0.0
        if self._stale and time.monotonic() - self._refreshed_at >= interval:
            self.refresh()

    def _running(self) -> bool:
        return any(self.counts.get(status, 0) for status in JobStatus if status.is_running)

    def refresh(self) -> None:
        self._stale = False
        self._refreshed_at = time.monotonic()
        if self._in_flight:
            self._again = True  # coalesce: one more read after the current one
            return
        self._in_flight = True
        statuses, generation, text = FILTERS[self.filter_name], self._generation, self.search_text
        starred = self.filter_name in STARRED_ONLY
        limit = SEARCH_LIMIT if text or starred else PAGE_SIZE
        # Below the first page, only unfinished rows on screen are re-read; the rest are
        # re-read when scrolled into view (`JobsPanel` asks for a refresh on scroll).
        first, last = self.visible_rows()
        shown = self.jobs.rows()[max(limit, first) : last + 1]
        watch = [row.id for row in shown if row.may_change]
        # Queued rows at the top, in the queue's order: re-read, claims take them out of it.
        watch += [r.id for r in self.jobs.rows() if r.status is JobStatus.PENDING]
        watch = list(dict.fromkeys(watch))
        self.runner.run(
            lambda: self.service.snapshot(statuses, limit, watch, text, starred),
            lambda snap: self._apply(snap, limit, generation),
            self._failed_refresh,
        )

    def _apply(self, snap: Snapshot, limit: int, generation: int) -> None:
        self._in_flight = False
        if generation == self._generation:
            self._note_settled(snap.rows)
            self._note_settled([row for row in snap.updates.values() if row is not None])
            # A search shows its newest SEARCH_LIMIT matches at once: no further pages.
            done = (
                len(snap.rows) < limit or bool(self.search_text) or self.filter_name in STARRED_ONLY
            )
            self.jobs.replace_head(snap.rows, done, snap.updates, queued=snap.queued)
            if snap.search_problem != self.search_problem:
                self.search_problem = snap.search_problem
                self.search_checked.emit(snap.search_problem)
            for row in snap.rows:
                if not row.status.is_running:
                    self.live.forget(row.id)
            if snap.counts != self.counts or not self._counted:
                self.counts, self._counted = snap.counts, True
                self.counts_changed.emit(snap.counts)
            self.refreshed.emit()
        if self._again or generation != self._generation:
            self._again = False
            self.refresh()

    def _failed_refresh(self, message: str) -> None:
        self._in_flight = False
        if self.service.is_open:  # a store that never opened was already reported once
            self.error.emit(self.tr("Could not read the job list: {error}").format(error=message))

    def _note_settled(self, rows: Sequence[JobRow]) -> None:
        # Only jobs we saw earlier in another status: no notifications for old news at launch.
        for row in rows:
            before = self._known.get(row.id)
            if before is not None and before != row.status and row.status in SETTLED:
                self.settled.emit(row)
            self._known[row.id] = row.status

    def set_search(self, text: str) -> None:
        """Show only jobs whose prompt has these words (read on the store thread)."""
        text = text.strip()
        if text == self.search_text:
            return
        self.search_text = text
        self._generation += 1
        self.jobs.clear()
        self.refresh()

    def set_filter(self, name: ListFilter) -> None:
        if name == self.filter_name:
            return
        self.filter_name = name
        self._generation += 1
        self.jobs.clear()
        self.refresh()

    def _fetch_page(self, before_id: int) -> None:
        statuses, generation = FILTERS[self.filter_name], self._generation

        def append(rows: tuple[JobRow, ...]) -> None:
            if generation == self._generation:
                self.jobs.append_page(rows, full=len(rows) == PAGE_SIZE)

        self.runner.run(lambda: self.service.page(statuses, before_id), append, self._failed_page)

    def _failed_page(self, message: str) -> None:
        self.jobs.fetching = False
        self.error.emit(self.tr("Could not read more jobs: {error}").format(error=message))

    # --- requests -----------------------------------------------------------------------------

    def submit(
        self,
        params: GenerationParams,
        count: int = 1,
        *,
        init_png: bytes | None = None,
        upscale: bool = False,
        last_png: bytes | None = None,
    ) -> None:
        self._request(
            lambda: self.service.submit(
                params, count, init_png=init_png, upscale=upscale, last_png=last_png
            ),
            self.submitted.emit,
        )

    def submit_job(self, job: NewJob) -> None:
        self._request(lambda: self.service.submit_job(job), self.submitted.emit)

    def upscale(self, job_ids: Sequence[int]) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.upscale(ids), self.submitted.emit)

    def variations(self, job_id: int, count: int, strength: float | None = None) -> None:
        self._request(lambda: self.service.variations(job_id, count, strength), self.submitted.emit)

    def request(self, event: JobEvent, job_ids: Sequence[int]) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.request(event, ids))

    # --- cancelling, with undo for queued jobs -------------------------------------------------

    @property
    def undo_ms(self) -> int:
        return UNDO_MS

    def cancel(self, job_ids: Sequence[int]) -> None:
        """Cancel; queued jobs are only held for `UNDO_MS`, so it can be undone."""
        ids = tuple(job_ids)

        def done(outcome: CancelOutcome) -> None:
            for message in outcome.errors:
                self.error.emit(message)
            self._offer_undo(outcome)
            self.refresh()

        def failed(message: str) -> None:
            self.error.emit(self.tr("Request failed: {error}").format(error=message))

        self.runner.run(lambda: self.service.cancel_undoably(ids), done, failed)

    def _offer_undo(self, outcome: CancelOutcome) -> None:
        self.finish_cancel()  # an earlier undo chance ends: one at a time
        if outcome.held:
            self._held = outcome
            self._undo_timer.start(UNDO_MS)
        self.cancel_held.emit(outcome)

    def finish_cancel(self) -> None:
        """The undo time is over: cancel the held jobs (on the database thread)."""
        held = self._take_held()
        if held is not None:
            self._request(lambda: self.service.finish_cancel(held.held))

    def undo_cancel(self) -> CancelOutcome | None:
        """Take the offered cancel back; what it held (None: no offer was open)."""
        held = self._take_held()
        if held is not None:
            self._request(lambda: self.service.undo_cancel(held))
        return held

    def finish_cancel_now(self) -> None:
        """At quit the undo chance is over: cancel held jobs here (the store thread stops)."""
        held = self._take_held()
        if held is not None:
            try:
                self.service.finish_cancel(held.held)
            except Exception:  # they stay held; the next launch cancels them
                log.exception("could not finish cancelling %s", held.held)

    def _take_held(self) -> CancelOutcome | None:
        held, self._held = self._held, None
        self._undo_timer.stop()
        if held is not None:
            self.undo_closed.emit()
        return held

    def rerun(self, job_ids: Sequence[int]) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.rerun(ids), self.submitted.emit)

    def move(self, job_ids: Sequence[int], delta: int) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.move(ids, delta))

    def move_to(self, job_ids: Sequence[int], top: bool) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.move_to(ids, top))

    def move_before(self, job_ids: Sequence[int], before: int) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.move_before(ids, before))

    def star(self, job_ids: Sequence[int], on: bool) -> None:
        ids = tuple(job_ids)
        self._request(lambda: self.service.star(ids, on))

    def resume_all(self, job_ids: Sequence[int]) -> None:
        """Resume those of `job_ids` that are paused (the restore banner's action)."""
        ids = tuple(job_ids)

        def resume_paused() -> Outcome:
            paused = [
                i for i in ids if (row := self.service.job(i)) and row.allows(JobEvent.RESUME)
            ]
            return self.service.request(JobEvent.RESUME, paused)

        self._request(resume_paused)

    def _request(
        self,
        call: Callable[[], Outcome],
        on_ids: Callable[[tuple[int, ...]], None] | None = None,
    ) -> None:
        def done(outcome: Outcome) -> None:
            for message in outcome.errors:
                self.error.emit(message)
            if on_ids is not None and outcome.job_ids:
                on_ids(outcome.job_ids)
            self.refresh()

        self.runner.run(
            call,
            done,
            lambda message: self.error.emit(
                self.tr("Request failed: {error}").format(error=message)
            ),
        )
