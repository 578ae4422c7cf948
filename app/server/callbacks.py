"""Per-job callback URLs: told once the job is settled, after that commit, never inside it.

A thread of the server reads the settled jobs whose callback is not delivered yet (the
`api_job` table, so a restart carries on where it stopped) and POSTs each one its final
status, retrying with exponential backoff until a 2xx or `MAX_ATTEMPTS`. Each try is
recorded with the job (`callback` in its JSON: attempts, result) and as a note in its
timeline (`jobs.notes`), in one small write after the try, long after the job's final
transition committed. Delivery is at least once: a server killed between the POST and
its record sends it again (once its claim on the try lapsed), with the same
`X-Easel-Delivery` header, by which a receiver drops a repeat. Each try is claimed first
with a conditional update, so several servers on one database never send it twice.
"""

from __future__ import annotations

import logging
import threading

import httpx

from app.engine.jobs.queue import JobQueue
from app.errors import EaselError
from app.server.records import ApiRecord, Records

log = logging.getLogger(__name__)

POLL_S = 0.2
IDLE_POLL_S = 1.0  # after passes that found nothing due, the wait grows up to this
TIMEOUT_S = 10.0
MAX_ATTEMPTS = 8
FIRST_BACKOFF_S = 1.0
MAX_BACKOFF_S = 300.0
LEASE_S = 2 * TIMEOUT_S + 5  # a try claimed by a server that died is taken again after this


class CallbackSender:
    def __init__(self, queue: JobQueue, records: Records, *, poll_s: float = POLL_S) -> None:
        self.queue = queue
        self.records = records
        self.poll_s = poll_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="callbacks", daemon=True)
        self._client = httpx.Client(timeout=TIMEOUT_S, follow_redirects=False)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=TIMEOUT_S + 1)
        self._client.close()

    def _run(self) -> None:
        # A pass that finds nothing due doubles the wait before the next, up to
        # IDLE_POLL_S (a server whose clients give no callback URLs, or whose jobs run
        # for a while, then reads api_job once a second, not five times: CPU its worker
        # would lose); a pass that tried something comes back at `poll_s`.
        wait = self.poll_s
        while not self._stop.wait(wait):
            tried = False
            try:
                tried = self.send_due(count_tries=True) > 0
            except EaselError as error:  # the store away or locked: the next pass tries again
                log.warning("callbacks: %s", error)
            except Exception:
                log.exception("callbacks: a pass failed")
            wait = self.poll_s if tried else min(IDLE_POLL_S, 2 * wait)

    def send_due(self, *, count_tries: bool = False) -> int:
        """One pass: every due callback tried once. Returns how many were delivered (with
        `count_tries`, how many were due)."""
        delivered = tried = 0
        for record, status in self.records.callbacks_due(self.queue.clock()):
            if self._stop.is_set():
                break
            tried += 1
            delivered += self._send(record, status)
        return tried if count_tries else delivered

    def _send(self, record: ApiRecord, status: str) -> bool:
        assert record.callback_url is not None
        if not self.records.claim_callback(record, self.queue.clock(), LEASE_S):
            return False  # another server on this database is sending it
        job = self.queue.get(record.job_id)
        payload = {
            "job_id": job.id, "status": job.status, "error": job.error, "seed": job.seed,
            "image": f"/api/v1/jobs/{job.id}/image" if job.status == "SUCCESS" else None,
            "finished_at": job.finished_at,
        }  # fmt: skip
        attempts = record.callback_attempts + 1
        headers = {"X-Easel-Delivery": f"job-{job.id}", "User-Agent": "Easel-callback"}
        try:
            response = self._client.post(record.callback_url, json=payload, headers=headers)
            ok, result = response.is_success, f"HTTP {response.status_code}"
        except httpx.HTTPError as error:
            ok, result = False, f"{type(error).__name__}: {error}"[:300]
        now = self.queue.clock()
        told = f"callback {attempts} of {MAX_ATTEMPTS} to {record.callback_url}"
        if ok:
            self.records.callback_tried(
                job, attempts=attempts, next_at=None, done_at=now,
                result=f"delivered ({result}) with status {status}",
                note=f"{told}: delivered ({result}), status {status}", at=now,
            )  # fmt: skip
            log.info("job %s: callback delivered (%s)", record.job_id, result)
            return True
        if attempts >= MAX_ATTEMPTS:
            self.records.callback_tried(
                job, attempts=attempts, next_at=None, done_at=now,
                result=f"gave up after {attempts} attempts: {result}",
                note=f"{told} failed ({result}); given up", at=now,
            )  # fmt: skip
            log.warning("job %s: callback given up: %s", record.job_id, result)
            return False
        backoff = min(MAX_BACKOFF_S, FIRST_BACKOFF_S * 2 ** (attempts - 1))
        self.records.callback_tried(
            job, attempts=attempts, next_at=now + backoff, done_at=None,
            result=f"attempt {attempts} failed: {result}; next in {backoff:g} s",
            note=f"{told} failed ({result}); tried again in {backoff:g} s", at=now,
        )  # fmt: skip
        return False
