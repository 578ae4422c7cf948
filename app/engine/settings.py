"""User settings that the engine needs, persisted as JSON in the data folder.

Window geometry and other purely visual state belong to the GUI (QSettings), not here.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields, replace
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from app.durable import durable_replace
from app.engine import paths
from app.engine.api_access import host_name_problem
from app.engine.generation.files.sources import ModelSearchPath, hf_cache_dirs
from app.engine.jobs.affinity import AffinityBound
from app.engine.jobs.params import (
    DEFAULT_MODEL,
    DEFAULT_SCHEDULER,
    MAX_IMAGES,
    GenerationParams,
    InvalidParameters,
)

log = logging.getLogger(__name__)

SETTINGS_FILE = "settings.json"
PRUNE_EVERY_S = 3600.0  # how often Easel applies "keep finished jobs" by itself (window, fleet)
DB_ENV = "EASEL_DB"  # a PostgreSQL URL (or a SQLite file); the CLI's --db sets it


class InvalidSettings(ValueError):
    pass


class NewJobValues(StrEnum):
    """What the prompt panel shows at launch: the values last used, or the saved defaults."""

    LAST_USED = "last_used"
    DEFAULTS = "defaults"


@dataclass(frozen=True)
class JobDefaults:
    """The settings a new job starts with when Settings say so (and on "Reset to defaults")."""

    model: str = DEFAULT_MODEL
    sampler: str = DEFAULT_SCHEDULER
    steps: int = GenerationParams.steps
    cfg: float = GenerationParams.cfg
    width: int = GenerationParams.width
    height: int = GenerationParams.height
    images: int = 1

    def problems(self) -> list[str]:
        """The same bounds a submitted job is held to (GenerationParams), and the batch size."""
        problems = []
        try:
            GenerationParams(
                prompt="-",  # only the settings are defaults; the prompt is never one
                model=self.model, scheduler=self.sampler, steps=self.steps, cfg=self.cfg,
                width=self.width, height=self.height,
            ).validated()  # fmt: skip
        except InvalidParameters as error:
            problems.append(str(error))
        if not 1 <= self.images <= MAX_IMAGES:
            problems.append(f"images must be between 1 and {MAX_IMAGES}, not {self.images}")
        return problems

    @classmethod
    def from_json(cls, raw: object) -> JobDefaults:
        """From settings.json: missing or unknown keys are left at their defaults."""
        if not isinstance(raw, dict):
            raise InvalidSettings(f"new-job defaults must be a JSON object, not {raw!r}")
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})


@dataclass(frozen=True)
class Settings:
    models_dir: str = ""  # empty: <data dir>/models
    outputs_dir: str = ""  # empty: <data dir>/outputs
    workers: int = 1
    max_attempts: int = 3
    heartbeat_timeout_s: float = 15.0
    cancel_grace_s: float = 5.0
    # A running job is stuck once no step finished and it used no CPU time for 3 times its
    # slowest recent step (see `workers.stall`); outside the step loop (loading a model,
    # decoding), before a step's time is known, or while it computes, after this.
    stall_limit_s: float = 300.0
    # A PostgreSQL URL shared by several machines; empty: the SQLite file in the data folder.
    # Never with a password: libpq finds it in PGPASSWORD or ~/.pgpass.
    database_url: str = ""
    checkpoint_interval_s: float = 10.0  # a running job saves its progress this often; 0: off
    # Model CPU offload and VAE tiling: slower, for GPUs with little memory (see device.py).
    low_vram: bool = False
    keep_finished_days: int = 0  # prune finished jobs older than this; 0: keep them all
    keep_finished_jobs: int = 0  # prune finished jobs beyond the newest this many; 0: no limit
    new_jobs_start_with: NewJobValues = NewJobValues.LAST_USED
    new_job_defaults: JobDefaults = field(default_factory=JobDefaults)
    prune_images: bool = False  # a prune also deletes the removed jobs' images (never unasked)
    # The HTTP API (`python -m app serve`) on 127.0.0.1 at this port while the window is
    # open (app/ui/qt/api_server.py); 0: off.
    api_port: int = 0
    # Host names the API server answers to beside its address's own (a name for this
    # computer on the network, a reverse proxy's); any other Host gets 421.
    api_allowed_hosts: tuple[str, ...] = ()
    # The window's server wants its token (app/engine/api_access.py) from every client; this
    # lets A1111 clients that cannot send one use /sdapi without it, on 127.0.0.1 only.
    api_a1111_without_token: bool = False
    # A retried submit with the same Idempotency-Key gets the same jobs within this many
    # hours; older keys are forgotten (app/engine/jobs/request_keys.py). Stripe's is 24.
    idempotency_key_hours: float = 24.0
    # Model-aware claims: a worker prefers jobs for the models it holds, but never delays a
    # job by more than this long or this many jobs because of it (app/engine/jobs/affinity.py).
    affinity_max_wait_s: float = 60.0
    affinity_max_skips: int = 8
    # Memory loaded models may take, in GiB (VRAM first, then RAM); 0: from the machine's.
    memory_budget_gb: float = 0.0
    # Per-job callbacks (app/server/callbacks.py) go to public addresses only unless this
    # allows loopback, link-local and private ones (a receiver on this machine or LAN); and
    # each try, connect to answer, gets this long in all.
    allow_private_callbacks: bool = False
    callback_deadline_s: float = 10.0

    def validated(self) -> Settings:
        problems = []
        if not 1 <= self.workers <= 16:
            problems.append(f"workers must be between 1 and 16, not {self.workers}")
        if not 1 <= self.max_attempts <= 20:
            problems.append(f"max attempts must be between 1 and 20, not {self.max_attempts}")
        if not 2 <= self.heartbeat_timeout_s <= 3600:
            problems.append("heartbeat timeout must be between 2 and 3600 seconds")
        if not 0.5 <= self.cancel_grace_s <= 600:
            problems.append("cancel grace period must be between 0.5 and 600 seconds")
        if not 10 <= self.stall_limit_s <= 3600:
            problems.append("stall limit must be between 10 and 3600 seconds")
        problems += _database_url_problems(self.database_url)
        if not (self.checkpoint_interval_s == 0 or 1 <= self.checkpoint_interval_s <= 3600):
            problems.append("checkpoint interval must be 0 (off) or between 1 and 3600 seconds")
        if self.keep_finished_days < 0 or self.keep_finished_jobs < 0:
            problems.append("keeping finished jobs takes 0 (no limit) or a positive number")
        if not (self.api_port == 0 or 1024 <= self.api_port <= 65535):
            problems.append("the API port must be 0 (off) or between 1024 and 65535")
        problems += [p for name in self.api_allowed_hosts if (p := host_name_problem(name))]
        if not 0.01 <= self.idempotency_key_hours <= 24 * 365:
            problems.append("Idempotency-Keys must be kept between 0.01 and 8760 hours")
        problems += [f"new-job defaults: {p}" for p in self.new_job_defaults.problems()]
        problems += AffinityBound(self.affinity_max_wait_s, self.affinity_max_skips).problems()
        if not 0 <= self.memory_budget_gb <= 4096:
            problems.append("the memory budget must be 0 (automatic) or up to 4096 GiB")
        if not 1 <= self.callback_deadline_s <= 120:
            problems.append("the callback deadline must be between 1 and 120 seconds")
        if problems:
            raise InvalidSettings("; ".join(problems))
        return self

    def models_path(self) -> Path:
        return Path(self.models_dir) if self.models_dir else paths.models_dir()

    def model_search_path(self) -> ModelSearchPath:
        """Where models are looked for: bundled, then this user's folder, then the HF cache."""
        return ModelSearchPath(
            bundled=(paths.bundled_models_dir(),),
            user=(self.models_path(),),
            hf_caches=hf_cache_dirs(),
        )

    def outputs_path(self) -> Path:
        path = Path(self.outputs_dir) if self.outputs_dir else paths.outputs_dir()
        path.mkdir(parents=True, exist_ok=True)
        return path

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes).validated()


def _database_url_problems(url: str) -> list[str]:
    if not url:
        return []
    if not url.startswith(("postgresql://", "postgresql+psycopg://", "postgres://")):
        return ["the database URL must start with postgresql://"]
    if urlsplit(url).password is not None:
        return [
            "the database URL must not hold a password (settings are a plain file): "
            "put it in PGPASSWORD or ~/.pgpass"
        ]
    return []


def database_location() -> str:
    """The job database: --db or $EASEL_DB, else the settings' URL, else the local SQLite file."""
    return os.environ.get(DB_ENV) or load_settings().database_url or str(paths.database_path())


def database_override() -> str | None:
    """The database --db or $EASEL_DB chose over the settings' (passwords hidden), or None."""
    chosen = os.environ.get(DB_ENV)
    if not chosen:
        return None
    from app.models.database_urls import is_database_url, safe_url

    return safe_url(chosen) if is_database_url(chosen) else chosen


def queue_is_shared() -> bool:
    """Whether the job database is a shared (PostgreSQL) queue. Any peer writes its rows, so
    its workers take models by name only, and submits name them so (README "Files and names")."""
    from app.models.database_urls import is_database_url

    return is_database_url(database_location())


def shared_queue_from_settings() -> bool:
    """Whether the job database is the settings' shared queue (not --db, $EASEL_DB or the
    local file): then Settings is where a wrong one is put right."""
    return not os.environ.get(DB_ENV) and bool(load_settings().database_url)


def settings_path() -> Path:
    return paths.data_dir() / SETTINGS_FILE


def load_settings(path: Path | None = None) -> Settings:
    """The saved settings; defaults for anything missing, unknown or unreadable (logged)."""
    path = path or settings_path()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Settings()
    except (OSError, ValueError) as error:
        log.warning("ignoring unreadable settings file %s: %s", path, error)
        return Settings()
    try:
        return _from_json(raw).validated()
    except (TypeError, ValueError, AttributeError) as error:
        log.warning("ignoring invalid settings in %s: %s", path, error)
        return Settings()


def _from_json(raw: dict[str, Any]) -> Settings:
    """Settings from the file's object; keys of older or newer versions are skipped."""
    known = {f.name for f in fields(Settings)}
    values = {k: v for k, v in raw.items() if k in known}
    if "new_jobs_start_with" in values:
        values["new_jobs_start_with"] = NewJobValues(values["new_jobs_start_with"])
    if "api_allowed_hosts" in values:
        if not isinstance(values["api_allowed_hosts"], list):
            raise InvalidSettings("api_allowed_hosts must be a list of host names")
        values["api_allowed_hosts"] = tuple(str(name) for name in values["api_allowed_hosts"])
    if "new_job_defaults" in values:
        values["new_job_defaults"] = JobDefaults.from_json(values["new_job_defaults"])
    return Settings(**values)


def save_settings(settings: Settings, path: Path | None = None) -> None:
    """Write atomically and durably, so neither a crash mid-save nor a power cut after it
    leaves a half-written file or takes the saved settings back."""
    path = path or settings_path()
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(settings.validated()), indent=2), encoding="utf-8")
    durable_replace(tmp, path)
