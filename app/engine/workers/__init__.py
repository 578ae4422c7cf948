"""Running jobs: the worker process, one claimed job, the supervisor, the maintenance pass
(watchdog, retry, reconcile), launch recovery, liveness, the worker table and wake-ups."""
