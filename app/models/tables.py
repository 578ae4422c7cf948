"""The job table and its history.

Times are Unix seconds (float): cheap to compare on hot paths (claims, stale
heartbeats), the same on SQLite and PostgreSQL, and free of time-zone surprises.
Statuses and events are stored as their enum values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    false,
    text,
)
from sqlalchemy.orm import configure_mappers, instrumentation
from sqlmodel import Field, SQLModel

STATUS_TYPE = String(16)

# The partial index of queued jobs (`ix_job_queue`): a statement that reads it says this
# literally (a bound value cannot prove a row is in a partial index).
QUEUED_ONLY = "status = 'PENDING'"

# job.id is an INTEGER: 64 bits on SQLite but 32 on PostgreSQL, so no job id is larger.
MAX_JOB_ID = 2**31 - 1


class Job(SQLModel, table=True):
    __tablename__ = "job"
    __table_args__ = (
        # The claim: next PENDING job by priority, then age.
        Index("ix_job_claim", "status", "priority", "id"),
        # The model-aware claim's window: the queued jobs alone, in the order they go
        # (`queue_sql.affinity_choice_statement`). Schema 19.
        Index(
            "ix_job_queue",
            "status",  # its equality, as the claim index's, and then no sorting: SQLite's pick
            text("priority DESC"),
            "id",
            sqlite_where=text(QUEUED_ONLY),
            postgresql_where=text(QUEUED_ONLY),
        ),
        # The watchdog: running jobs whose heartbeat is stale.
        Index("ix_job_heartbeat", "status", "heartbeat_at"),
        # The job list: newest first, optionally filtered by status.
        Index("ix_job_status_id", "status", "id"),
        # History: searches by date, retention by age.
        Index("ix_job_created", "created_at"),
        Index("ix_job_finished", "finished_at"),
        # Removing a job checks for re-runs pointing at it: without this, a scan per job.
        Index("ix_job_rerun_of", "rerun_of"),
        # A group's members (batch, grid, wildcard expansion), in cell order. Schema 9.
        Index("ix_job_group", "group_id", "group_cell"),
    )

    id: int | None = Field(default=None, primary_key=True)  # at most MAX_JOB_ID
    prompt: str
    negative_prompt: str = ""
    model: str
    scheduler: str
    steps: int
    cfg: float
    width: int
    height: int
    # Seeds go up to 2**32 - 1: past PostgreSQL's INTEGER (SQLite's INTEGER holds any size).
    seed: int = Field(sa_column=Column(BigInteger, nullable=False))
    # img2img: "" (none), "job:<id>" (a parent's output) or "upload:<sha256>" (a job_input row).
    # Server defaults, so writers that do not know img2img (raw inserts, copies) still insert.
    init_image: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    strength: float = Field(
        default=1.0, sa_column=Column(Float, nullable=False, server_default=text("1.0"))
    )
    # Inpaint: "" (none) or "upload:<sha256>" of the mask (a job_input row of kind "mask").
    mask: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    mask_blur: int = Field(
        default=4, sa_column=Column(Integer, nullable=False, server_default=text("4"))
    )
    only_masked: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    mask_padding: int = Field(
        default=32, sa_column=Column(Integer, nullable=False, server_default=text("32"))
    )
    # Schema 9 (groups of jobs): A1111's variation seed, the wildcard template, the job's
    # kind and its upscaler model. Server defaults, so older writers still insert.
    variation_seed: int = Field(
        default=-1, sa_column=Column(BigInteger, nullable=False, server_default=text("-1"))
    )
    variation_strength: float = Field(
        default=0.0, sa_column=Column(Float, nullable=False, server_default=text("0.0"))
    )
    prompt_template: str = Field(
        default="", sa_column=Column(String, nullable=False, server_default="")
    )
    kind: str = Field(
        default="generate",
        sa_column=Column(String(16), nullable=False, server_default="generate"),
    )
    upscaler: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    # ControlNet: "" (none) or the layers as JSON (`params.encode_control`); each layer's
    # image is a job_input row of kind "control<i>".
    control: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # IP-Adapter: "" or the reference images as JSON (`params.encode_reference`); each image
    # is a job_input row of kind "reference<i>".
    reference: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # Schema 16: step caching ("off", "fast", "fastest") and its threshold (0: the setting's).
    speed: str = Field(
        default="off", sa_column=Column(String(16), nullable=False, server_default="off")
    )
    speed_threshold: float = Field(
        default=0.0, sa_column=Column(Float, nullable=False, server_default=text("0.0"))
    )
    # Schema 17: run the model compiled (torch.compile of its repeated blocks).
    compile: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # Schema 18: a video job's frame count and rate (1 frame for every other kind).
    frames: int = Field(
        default=1, sa_column=Column(Integer, nullable=False, server_default=text("1"))
    )
    fps: int = Field(
        default=16, sa_column=Column(Integer, nullable=False, server_default=text("16"))
    )
    # Schema 20: the sampler's schedule over the model's, as JSON ("": the model's own), e.g.
    # a few-step LoRA's (`params.encode_scheduler_config`).
    scheduler_config: str = Field(
        default="", sa_column=Column(Text, nullable=False, server_default="")
    )
    # Schema 21: an edit's input images after its init image, as JSON (`params.
    # encode_edit_images`); each image is a job_input row of kind "edit0", "edit1", ...
    edit_images: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # Schema 22: a video's last frame, as `init_image` names its first ("" for none).
    last_image: str = Field(default="", sa_column=Column(String, nullable=False, server_default=""))
    # Schema 23: how firmly a clip's images hold (LTX-Video 0.9.5+'s conditioning strengths,
    # 1: stock's) and the last image's frame (-1: the clip's last).
    image_strength: float = Field(
        default=1.0, sa_column=Column(Float, nullable=False, server_default=text("1.0"))
    )
    last_image_strength: float = Field(
        default=1.0, sa_column=Column(Float, nullable=False, server_default=text("1.0"))
    )
    last_image_frame: int = Field(
        default=-1, sa_column=Column(Integer, nullable=False, server_default=text("-1"))
    )

    status: str = Field(sa_column=Column(STATUS_TYPE, nullable=False))
    version: int = 0
    attempt: int = 1
    max_attempts: int = 3
    given_up: bool = False
    priority: int = 0

    worker_id: str | None = None
    heartbeat_at: float | None = None
    not_before: float | None = None
    progress_step: int = 0
    progress_total: int = 0

    created_at: float
    updated_at: float
    started_at: float | None = None
    finished_at: float | None = None

    output_dir: str | None = None  # where the image was asked to go; None: the worker's default
    output_path: str | None = None
    error: str | None = None
    error_transient: bool | None = None  # the failure may pass (retried); None: no failure
    checkpoint_path: str | None = None
    # A cancel that can still be undone (the window's Undo): held PAUSED until this time,
    # then cancelled, by the window or, if it died meanwhile, by recovery or maintenance
    # (app/engine/jobs/undo.py). None: no cancel is pending. Schema 8.
    cancel_after: float | None = None
    rerun_of: int | None = Field(default=None, foreign_key="job.id")
    # The group the job belongs to (job_group.id) and its place there (a batch's index, a
    # grid's cell); None for a lone job. A grid's composing job has a group and no cell.
    group_id: int | None = None
    group_cell: int | None = None
    # A favourite: never pruned. A server default, so writers that do not know it still insert.
    starred: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )
    # Model-aware claims (app/engine/jobs/affinity.py): how often a claim took a younger job
    # for its model while this one waited, and when it first did; reset when it is claimed.
    # The claim refuses to pass it once either reaches its bound. Schema 9.
    passed_over: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default=text("0"))
    )
    passed_over_at: float | None = None


class JobTransition(SQLModel, table=True):
    """One row per status change: the job's timeline."""

    __tablename__ = "job_transition"
    __table_args__ = (
        Index("ix_transition_job", "job_id", "id"),
        Index("ix_transition_at", "at"),  # stats over a period
    )

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id")
    attempt: int
    from_status: str | None = Field(default=None, sa_column=Column(STATUS_TYPE, nullable=True))
    to_status: str = Field(sa_column=Column(STATUS_TYPE, nullable=False))
    event: str = Field(sa_column=Column(STATUS_TYPE, nullable=False))
    source: str
    message: str = ""
    at: float


class JobNote(SQLModel, table=True):
    """A fact about a job that is not a change of its status (schema 14), shown in its
    timeline beside the transitions: each try of an HTTP callback and how it went. Written
    in its own small transaction after the fact, never inside a transition's."""

    __tablename__ = "job_note"
    __table_args__ = (Index("ix_job_note_job", "job_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int  # no foreign key, as api_job: a pruned job takes its notes with it
    attempt: int  # the job's attempt when the note was written
    source: str  # who wrote it: "callback"
    message: str
    at: float


class JobParent(SQLModel, table=True):
    """An edge of the job graph: `job_id` stays BLOCKED until `parent_id` is SUCCESS."""

    __tablename__ = "job_parent"
    # The primary key (job_id, parent_id) serves "parents of"; the index serves "children of".
    __table_args__ = (Index("ix_job_parent_parent", "parent_id", "job_id"),)

    job_id: int = Field(foreign_key="job.id", primary_key=True)
    parent_id: int = Field(foreign_key="job.id", primary_key=True)
    # Schema 9: the child waits for the parent to be settled (succeeded, cancelled, failed
    # for good), not to succeed: a grid waits so for its cells, and shows a failed one.
    settled: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=false())
    )


class JobGroup(SQLModel, table=True):
    """Jobs submitted as one: a batch, a grid (its axes in `spec`), a wildcard expansion."""

    __tablename__ = "job_group"

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(sa_column=Column(String(16), nullable=False))  # batch, grid, wildcards
    label: str = ""  # what the job list shows for the group ("8 seeds of 'a cat'")
    spec: str = ""  # JSON: a grid's axes; "" otherwise
    created_at: float


class JobInput(SQLModel, table=True):
    """An image stored with its job (an uploaded init image, an inpaint mask; `InputKind`):
    a path may vanish, another host lacks it."""

    __tablename__ = "job_input"

    job_id: int = Field(foreign_key="job.id", primary_key=True)
    kind: str = Field(
        default="init",
        sa_column=Column(String(16), primary_key=True, nullable=False, server_default="init"),
    )
    png: bytes


class JobFile(SQLModel, table=True):
    """A job's finished image or its saved denoising progress, as bytes: no machine needs
    another's disk (see app/engine/store/stored_files.py). Local files stay a cache beside it."""

    __tablename__ = "job_file"
    __table_args__ = (Index("ix_job_file_job", "job_id", "kind"),)

    id: int | None = Field(default=None, primary_key=True)
    job_id: int = Field(foreign_key="job.id")
    kind: str = Field(sa_column=Column(String(16), nullable=False))  # FileKind
    name: str  # the file's name where it was made (job-5-a1-c3.ckpt, 000005-7.png)
    attempt: int
    claim: int  # the job's version right after the claim that wrote it (see checkpoint_files)
    sha256: str = Field(sa_column=Column(String(64), nullable=False))
    size: int
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: float
    set_aside_at: float | None = None  # found damaged: kept as evidence, never read again


class WorkerRow(SQLModel, table=True):
    """One worker process, local or on another machine: what it is and what it does now.

    Each worker writes its own row (see app/engine/workers/presence.py); the app only writes
    `request` (drain or stop). "Lost" is never stored: it is a row not heard from for the
    liveness timeout, decided when the row is read (app/engine/workers/roster.py)."""

    __tablename__ = "worker"
    __table_args__ = (Index("ix_worker_last_seen", "last_seen_at"),)

    id: str = Field(primary_key=True)  # host:pid:token, as on the jobs it claims
    machine: str  # --name, or the host name
    device: str | None = None  # "cuda/float16", "cpu/float32"; None until known
    model: str | None = None  # the model it loaded last
    # The models it holds in memory now, most recently used first, as a JSON list of the
    # names jobs give (schema 10): claims of other workers leave these models to it.
    models: str | None = None
    state: str = Field(sa_column=Column(String(16), nullable=False))  # WorkerState
    current_job: int | None = None  # no foreign key: a pruned job must not block the row
    started_at: float
    last_seen_at: float
    jobs_done: int = 0
    request: str | None = Field(default=None, sa_column=Column(String(16), nullable=True))
    requested_by: str | None = None  # who asked, for the paused job's timeline


class RequestKey(SQLModel, table=True):
    """A client's `Idempotency-Key` and the jobs its first request made (schema 9): the same
    key sent again (a retried POST) answers with those jobs and stores nothing new. The key
    row is written first in the submit's own transaction, so two requests racing with one
    key make one set of jobs on either store (app/engine/jobs/request_keys.py)."""

    __tablename__ = "request_key"
    __table_args__ = (Index("ix_request_key_created", "created_at"),)

    key: str = Field(sa_column=Column(String(200), primary_key=True))
    fingerprint: str  # a digest of the request: the key reused for another request is refused
    job_ids: str = ""  # JSON {"jobs": [...], "follow_ups": [...]}; no foreign key (prune)
    created_at: float


class ApiJob(SQLModel, table=True):
    """What an HTTP client asked for a job beyond its settings (schema 9): who asked, through
    which API, and the callback URL told of its final status (app/server/callbacks.py)."""

    __tablename__ = "api_job"
    __table_args__ = (Index("ix_api_job_callback", "callback_done_at", "job_id"),)

    job_id: int = Field(primary_key=True)  # no foreign key: a pruned job must not block it
    api: str = Field(sa_column=Column(String(16), nullable=False))  # "easel" or "sdapi"
    client: str = ""
    callback_url: str | None = None
    callback_attempts: int = 0
    callback_next_at: float | None = None  # not before this time (backoff)
    callback_done_at: float | None = None  # delivered (2xx) or given up
    callback_result: str = ""  # "delivered: 200", "gave up after 8 attempts: ..."


class QueueSecret(SQLModel, table=True):
    """A secret of this queue (schema 15), made once and shared by every server on it: the
    key that signs callbacks ("callback"), so a receiver checks one signature whichever
    server sent it. In the queue, not in a file of one machine: servers on a shared
    PostgreSQL queue must sign alike (app/server/signing.py)."""

    __tablename__ = "queue_secret"

    name: str = Field(sa_column=Column(String(32), primary_key=True))
    value: str
    created_at: float


class SchemaInfo(SQLModel, table=True):
    """One row: the schema version this database is at (portable, unlike PRAGMA user_version)."""

    __tablename__ = "schema_info"

    id: int = Field(default=1, primary_key=True)
    version: int


JOB = Job.__table__  # type: ignore[attr-defined]
TRANSITION = JobTransition.__table__  # type: ignore[attr-defined]
JOB_PARENT = JobParent.__table__  # type: ignore[attr-defined]
JOB_INPUT = JobInput.__table__  # type: ignore[attr-defined]
JOB_GROUP = JobGroup.__table__  # type: ignore[attr-defined]
JOB_FILE = JobFile.__table__  # type: ignore[attr-defined]
WORKER = WorkerRow.__table__  # type: ignore[attr-defined]
REQUEST_KEY = RequestKey.__table__  # type: ignore[attr-defined]
API_JOB = ApiJob.__table__  # type: ignore[attr-defined]
JOB_NOTE = JobNote.__table__  # type: ignore[attr-defined]
QUEUE_SECRET = QueueSecret.__table__  # type: ignore[attr-defined]


# A stored job row, as `stored_job` types it: the columns whose driver values may not be the
# field's Python type (SQLite gives 0/1 for a boolean; float() makes sure of the floats for
# next to nothing).
_JOB_FIELDS = frozenset(Job.model_fields)
_JOB_BOOLEANS = tuple(column.name for column in JOB.c if isinstance(column.type, Boolean))
_JOB_FLOATS = tuple(column.name for column in JOB.c if isinstance(column.type, Float))
_JOB_CLASS = instrumentation.manager_of_class(Job)


def stored_job(values: Mapping[str, Any]) -> Job:
    """The Job of a row just read from the job table (every column, by name), built the way
    SQLAlchemy loads one: its values straight into the instance, not through validation.
    The row's values are of its columns' types already, but for booleans and floats, typed
    here; `Job.model_validate` costs 0.3-0.5 ms a job (an instrumented setattr per field),
    this 0.02: it was the claim's largest cost after the commit's. Anything but one full
    job row is validated the slow way, which says what is wrong with it."""
    if values.keys() != _JOB_FIELDS:
        return Job.model_validate(values)
    fields = dict(values)
    for name in _JOB_BOOLEANS:
        if fields[name] is not None:
            fields[name] = bool(fields[name])
    for name in _JOB_FLOATS:
        if fields[name] is not None:
            fields[name] = float(fields[name])
    if not _JOB_CLASS.mapper.configured:  # as a first Job() or query would configure it
        configure_mappers()
    job: Job = _JOB_CLASS.new_instance()  # with its SQLAlchemy state, as a loaded one has
    job.__dict__.update(fields)
    object.__setattr__(job, "__pydantic_fields_set__", set(fields))
    object.__setattr__(job, "__pydantic_extra__", None)
    return job
