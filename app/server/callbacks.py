"""Per-job callback URLs: told once the job is settled, after that commit, never inside it.

A thread of the server reads the settled jobs whose callback is not delivered yet (the
`api_job` table, so a restart carries on where it stopped) and hands each to one of a few
sender threads, which POSTs it its final status, retrying with exponential backoff until a
2xx or `MAX_ATTEMPTS`. Each try is recorded with the job (`callback` in its JSON: attempts,
result) and as a note in its timeline (`jobs.notes`), in one small write after the try,
long after the job's final transition committed. Delivery is at least once: a server
killed between the POST and its record sends it again (once its claim on the try lapsed),
with the same `X-Easel-Delivery` header, by which a receiver drops a repeat.

Each try is claimed first with a conditional update, for longer than the try can last: it
goes only to an address checked public (`callback_targets`, unless private networks are
allowed), within one deadline for all of it (`callback_http`), so a slow receiver holds one
sender for at most the deadline, the others go on, and no other server on the database
takes the try while it runs. The body is signed with the queue's secret (`signing`).
Timeline notes say what came of a try in a few fixed words ("delivered (HTTP 204)",
"failed: receiver answered HTTP 500", "refused: private address"), never an exception's
text or an answer's body: what a probe of someone else's network found stays unsaid.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from app.engine.jobs.api_jobs import ApiJobs, ApiRecord
from app.engine.jobs.queue import Job, JobQueue
from app.engine.settings import Settings
from app.errors import EaselError
from app.server.callback_http import CallbackFailed, DeadlinePassed, post
from app.server.callback_targets import (
    CallbackRefused,
    checked_address,
    parse_callback_url,
    shown_url,
)
from app.server.signing import SIGNATURE_HEADER, signature

log = logging.getLogger(__name__)

POLL_S = 0.2
IDLE_POLL_S = 1.0  # after passes that found nothing due, the wait grows up to this
DEADLINE_S = 10.0  # one try, from resolving the host to the answer's status (the default)
SENDERS = 4  # tries at once: slow receivers hold at most these, each for the deadline
MAX_ATTEMPTS = 8
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 300.0
# A claim outlasts its try by this much: the try's record is written in it, and the clocks
# of machines on a shared queue may differ a little. A try claimed by a server that died is
# taken again after the whole lease.
LEASE_MARGIN_S = 15.0


@dataclass(frozen=True)
class CallbackPolicy:
    allow_private: bool = False
    deadline_s: float = DEADLINE_S

    @property
    def lease_s(self) -> float:
        return self.deadline_s + LEASE_MARGIN_S

    @classmethod
    def from_settings(cls, settings: Settings) -> CallbackPolicy:
        return cls(settings.allow_private_callbacks, settings.callback_deadline_s)


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    said: str  # "delivered (HTTP 204)", "failed: ...", "refused: ..."


class CallbackSender:
    def __init__(
        self, queue: JobQueue, records: ApiJobs, *, policy: CallbackPolicy | None = None,
        secret: str | None = None, poll_s: float = POLL_S, senders: int = SENDERS,
    ) -> None:  # fmt: skip
        self.queue = queue
        self.records = records
        self.policy = policy or CallbackPolicy()
        self.poll_s = poll_s
        self._secret = secret  # None: the queue's, read (or made) at the first try
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="callbacks", daemon=True)
        self._senders = ThreadPoolExecutor(senders, thread_name_prefix="callback-send")
        self._free = threading.Semaphore(senders)
        self._sending: set[int] = set()  # jobs whose try a sender thread has now
        self._lock = threading.Lock()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ends the passes; a try under way ends within its deadline."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.poll_s + IDLE_POLL_S + 1)
        self._senders.shutdown(wait=True, cancel_futures=True)

    def _run(self) -> None:
        # A pass that finds nothing due doubles the wait before the next, up to
        # IDLE_POLL_S (a server whose clients give no callback URLs, or whose jobs run
        # for a while, then reads api_job once a second, not five times: CPU its worker
        # would lose); a pass that found something comes back at `poll_s`.
        wait = self.poll_s
        while not self._stop.wait(wait):
            found = False
            try:
                found = self._hand_out()
            except EaselError as error:  # the store away or locked: the next pass tries again
                log.warning("callbacks: %s", error)
            except Exception:
                log.exception("callbacks: a pass failed")
            wait = self.poll_s if found else min(IDLE_POLL_S, 2 * wait)

    def _hand_out(self) -> bool:
        """Gives each due callback to a free sender thread. Whether any was due.

        One due while every sender is busy stays unclaimed until a later pass: a claim is
        taken only by the thread that sends at once, so its lease never runs out waiting."""
        due = self.records.callbacks_due(self.queue.clock())
        for record, status in due:
            if self._stop.is_set():
                break
            with self._lock:
                if record.job_id in self._sending:
                    continue
            if not self._free.acquire(blocking=False):
                break
            with self._lock:
                self._sending.add(record.job_id)
            self._senders.submit(self._send_in_thread, record, status)
        return bool(due)

    def _send_in_thread(self, record: ApiRecord, status: str) -> None:
        try:
            self._send(record, status)
        except EaselError as error:
            log.warning("callbacks: job %s: %s", record.job_id, error)
        except Exception:
            log.exception("callbacks: job %s: a try failed", record.job_id)
        finally:
            with self._lock:
                self._sending.discard(record.job_id)
            self._free.release()

    def send_due(self, *, count_tries: bool = False) -> int:
        """One pass in this thread: every due callback tried once, one after the other.
        Returns how many were delivered (with `count_tries`, how many were due)."""
        delivered = tried = 0
        for record, status in self.records.callbacks_due(self.queue.clock()):
            if self._stop.is_set():
                break
            tried += 1
            delivered += self._send(record, status)
        return tried if count_tries else delivered

    def secret(self) -> str:
        if self._secret is None:
            self._secret = self.records.callback_secret()[0]
        return self._secret

    def _send(self, record: ApiRecord, status: str) -> bool:
        assert record.callback_url is not None
        if not self.records.claim_callback(record, self.queue.clock(), self.policy.lease_s):
            return False  # another server on this database is sending it
        job = self.queue.get(record.job_id)
        attempts = record.callback_attempts + 1
        outcome = self.try_once(record.callback_url, job, attempts)
        self._record(record, job, status, attempts, outcome)
        return outcome.delivered

    def try_once(self, url: str, job: Job, attempt: int) -> Outcome:
        """One POST of `job`'s final status, signed, within the deadline."""
        started = time.monotonic()
        payload = {
            "job_id": job.id, "status": job.status, "error": job.error, "seed": job.seed,
            "image": f"/api/v1/jobs/{job.id}/image" if job.status == "SUCCESS" else None,
            "finished_at": job.finished_at,
        }  # fmt: skip
        body = json.dumps(payload, separators=(",", ":")).encode("utf-8")
        headers = {"X-Easel-Delivery": f"job-{job.id}", "X-Easel-Attempt": str(attempt),
                   "User-Agent": "Easel-callback",
                   SIGNATURE_HEADER: signature(self.secret(), body)}  # fmt: skip
        deadline_s = self.policy.deadline_s
        try:
            target = parse_callback_url(url)
            address = checked_address(
                target, allow_private=self.policy.allow_private, timeout_s=deadline_s
            )  # fmt: skip
            left = deadline_s - (time.monotonic() - started)
            if left <= 0:
                raise DeadlinePassed
            code = post(target, address, body, headers, left)
        except CallbackRefused as refusal:
            return Outcome(False, refusal.outcome)
        except DeadlinePassed:
            return Outcome(False, f"failed: no answer within the {deadline_s:g} s deadline")
        except CallbackFailed as failure:
            return Outcome(False, f"failed: {failure.reason}")
        if 200 <= code < 300:
            return Outcome(True, f"delivered (HTTP {code})")
        if 300 <= code < 400:
            return Outcome(False, f"failed: receiver answered HTTP {code} (redirects are "
                                  "not followed)")  # fmt: skip
        return Outcome(False, f"failed: receiver answered HTTP {code}")

    def _record(
        self, record: ApiRecord, job: Job, status: str, attempts: int, outcome: Outcome
    ) -> None:
        assert record.callback_url is not None
        now = self.queue.clock()
        told = f"callback {attempts} of {MAX_ATTEMPTS} to {shown_url(record.callback_url)}"
        said = outcome.said
        if outcome.delivered:
            self.records.callback_tried(
                job, attempts=attempts, next_at=None, done_at=now,
                result=f"{said} with status {status}", note=f"{told}: {said}, status {status}",
                at=now,
            )  # fmt: skip
            log.info("job %s: callback %s", record.job_id, said)
            return
        if attempts >= MAX_ATTEMPTS:
            self.records.callback_tried(
                job, attempts=attempts, next_at=None, done_at=now,
                result=f"gave up after {attempts} attempts: {said}",
                note=f"{told}: {said}; given up", at=now,
            )  # fmt: skip
            log.warning("job %s: callback given up: %s", record.job_id, said)
            return
        backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (attempts - 1))
        self.records.callback_tried(
            job, attempts=attempts, next_at=now + backoff, done_at=None,
            result=f"attempt {attempts} {said}; next in {backoff:g} s",
            note=f"{told}: {said}; tried again in {backoff:g} s", at=now,
        )  # fmt: skip
