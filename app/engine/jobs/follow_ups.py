"""Submitting a job with what follows it: a seed batch, an upscale child, variations.

The one way in for every front end (the window, the command line, and whatever comes next):
all the jobs of one request are checked first and then stored in one transaction
(`JobQueue.submit_linked`), so a refused follow-up queues nothing, its parents included,
and closing the app between two of them can never leave half a request queued.

A follow-up may also be asked for a job that is already stored (`python -m app upscale 12`,
the window's Upscale on a finished image): it then waits for that job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from app.engine.jobs.graph import (
    DEFAULT_UPSCALE,
    DEFAULT_UPSCALE_STRENGTH,
    DEFAULT_VARIATION_STRENGTH,
    DEFAULT_VARIATIONS,
    upscale_params,
    variation_params,
)
from app.engine.jobs.graph_sql import digest
from app.engine.jobs.params import MAX_SEED, GenerationParams
from app.engine.jobs.queue import (
    DEFAULT_MAX_ATTEMPTS,
    JobQueue,
    NewJobs,
    StoredHook,
    params_of,
)
from app.engine.jobs.request_keys import RequestKey
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs

# What a worker would refuse, raised as a UserError before anything is stored: the CLI and
# the window hand in `check_runnable` (request_checks), so a follow-up job is refused at
# submit like any other, not FAILED later in the worker.
Check = Callable[[GenerationParams], object]

# A follow-up's settings name its parent's id, unknown before the parent is stored. The
# checks made before storing see this one instead; nothing they check depends on it.
_NOT_STORED_YET = 0


@dataclass(frozen=True)
class Upscale:
    """Hires fix: the parent's image resized by `scale`, then img2img at `strength`."""

    scale: float = DEFAULT_UPSCALE
    strength: float = DEFAULT_UPSCALE_STRENGTH
    # An upscaler model (models/upscale_models/) instead of Lanczos for the resize; with
    # `img2img=False` the job is the model upscale alone (no diffusion pass).
    upscaler: str = ""
    img2img: bool = True
    tiled: bool = False  # img2img region by region (Ultimate SD Upscale), for big results
    steps: int = 0  # the img2img pass's steps (A1111's hr_second_pass_steps); 0: the parent's


@dataclass(frozen=True)
class Variations:
    """`count` img2img children of the parent's image at low strength, new seeds."""

    count: int = DEFAULT_VARIATIONS
    strength: float = DEFAULT_VARIATION_STRENGTH


@dataclass(frozen=True)
class FollowUps:
    """What waits for each job of a request (BLOCKED until it succeeded)."""

    upscale: Upscale | None = None
    variations: Variations | None = None


@dataclass(frozen=True)
class NewJob:
    """A job to submit, `count` times: a random seed gives each its own, a fixed seed counts
    up from itself (a seed batch). `inputs`: the images stored with it; its settings are
    made to name an uploaded init image (img2img) and a mask (inpaint, `mask.prepare_mask`),
    and name the control and reference images themselves. `parents`: jobs it waits for
    (`--after`)."""

    params: GenerationParams
    count: int = 1
    parents: Sequence[int] = ()
    inputs: RunInputs = NO_INPUTS
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    priority: int = 0


@dataclass(frozen=True)
class Submitted:
    jobs: tuple[int, ...] = ()  # the new jobs (none when the follow-ups are for a stored job)
    follow_ups: tuple[int, ...] = field(default=())  # in the order of the jobs they follow
    replayed: bool = False  # the request's key was seen before: these are the first one's

    @property
    def all(self) -> tuple[int, ...]:
        return (*self.jobs, *self.follow_ups)


def submit_with_follow_ups(
    queue: JobQueue,
    job: NewJob | int,
    follow_ups: FollowUps = FollowUps(),  # frozen: the shared default is never changed
    *,
    source: str = "user",
    check: Check | None = None,
    key: RequestKey | None = None,
    with_jobs: StoredHook | None = None,
) -> Submitted:
    """Submit `job` (or take the stored job of that id) and the `follow_ups` of each of its
    jobs, in one transaction. Everything is validated and `check`ed before anything is
    stored; follow-ups get their parent's priority and attempts. Raises `UserError` (bad
    settings, no such job, what `check` refuses) having stored nothing. `key`: an
    Idempotency-Key, `with_jobs`: rows stored with the jobs (see `JobQueue.submit_keyed`);
    for a stored job, they cover its follow-ups."""
    if follow_ups.variations is not None and follow_ups.variations.count < 1:
        raise ValueError(f"count must be at least 1, not {follow_ups.variations.count}")
    if isinstance(job, int):
        return _follow_stored(queue, job, follow_ups, source, check, key, with_jobs)
    params = job.params
    if job.inputs.init_image is not None:
        params = replace(params, init_image=digest(job.inputs.init_image))
    if job.inputs.mask is not None:
        params = replace(params, mask=digest(job.inputs.mask))
    if job.inputs.last_image is not None:
        params = replace(params, last_image=digest(job.inputs.last_image))
    params = params.validated()
    _check_all([params, *_follow_up_params(params, _NOT_STORED_YET, follow_ups)], check)
    batch = NewJobs(
        seed_batch(params, job.count), parents=job.parents, inputs=job.inputs,
        priority=job.priority, max_attempts=job.max_attempts, source=source,
    )  # fmt: skip
    stored = queue.submit_keyed(
        batch, _followers(follow_ups, batch), key=key, with_jobs=with_jobs
    )  # fmt: skip
    return Submitted(tuple(stored.jobs), tuple(stored.follow_ups), stored.replayed)


def _follow_stored(
    queue: JobQueue,
    job_id: int,
    follow_ups: FollowUps,
    source: str,
    check: Check | None,
    key: RequestKey | None = None,
    with_jobs: StoredHook | None = None,
) -> Submitted:
    parent = queue.get(job_id)  # JobNotFound first: "There is no job 12"
    batch = _follow_up_params(params_of(parent), job_id, follow_ups)
    _check_all(batch, check)
    if not batch:
        return Submitted()
    waiting = NewJobs(batch, parents=[job_id], priority=parent.priority,
                      max_attempts=parent.max_attempts, source=source)  # fmt: skip
    stored = queue.submit_keyed(waiting, key=key, with_jobs=with_jobs)
    return Submitted((), tuple(stored.jobs), stored.replayed)


def seed_batch(params: GenerationParams, count: int) -> list[GenerationParams]:
    """`count` jobs of these settings: a random seed stays random (each job gets its own at
    submit), a fixed one counts up, wrapping at the largest seed."""
    if params.seed < 0:
        return [params] * count
    return [replace(params, seed=(params.seed + i) % (MAX_SEED + 1)) for i in range(count)]


def _followers(
    follow_ups: FollowUps, like: NewJobs
) -> Callable[[int, GenerationParams], list[NewJobs]]:
    """For a parent just stored (its id, its settings): the one batch that waits for it
    (its upscale first, then its variations), with `like`'s priority, attempts and source."""

    def of(parent_id: int, params: GenerationParams) -> list[NewJobs]:
        batch = _follow_up_params(params, parent_id, follow_ups)
        waiting = NewJobs(batch, parents=[parent_id], priority=like.priority,
                          max_attempts=like.max_attempts, source=like.source)  # fmt: skip
        return [waiting] if batch else []

    return of


def _follow_up_params(
    params: GenerationParams, parent_id: int, follow_ups: FollowUps
) -> list[GenerationParams]:
    """The follow-ups' settings: the upscale, then the variations (their seeds stay random:
    each gets its own at submit)."""
    batch = []
    if follow_ups.upscale is not None:
        batch.append(_upscaled(params, parent_id, follow_ups.upscale))
    if (variations := follow_ups.variations) is not None:
        batch.extend([_varied(params, parent_id, variations)] * variations.count)
    return batch


def _upscaled(params: GenerationParams, parent_id: int, upscale: Upscale) -> GenerationParams:
    upscaled = upscale_params(
        params, parent_id, scale=upscale.scale, strength=upscale.strength,
        upscaler=upscale.upscaler, img2img=upscale.img2img, tiled=upscale.tiled,
    )  # fmt: skip
    return replace(upscaled, steps=upscale.steps) if upscale.steps else upscaled


def _varied(params: GenerationParams, parent_id: int, variations: Variations) -> GenerationParams:
    return variation_params(params, parent_id, strength=variations.strength)


def _check_all(batch: Sequence[GenerationParams], check: Check | None) -> None:
    """The queue's own checks first (so bounds read the same as on submit), then `check`."""
    for params in batch:
        checked = params.validated()
        if check is not None:
            check(checked)


# --- the follow-ups of one stored job, by kind ------------------------------------------------


def submit_upscale(
    queue: JobQueue,
    parent_id: int,
    *,
    scale: float = DEFAULT_UPSCALE,
    strength: float = DEFAULT_UPSCALE_STRENGTH,
    source: str = "user",
    check: Check | None = None,
    upscaler: str = "",
    img2img: bool = True,
    tiled: bool = False,
) -> int:
    """Queue an upscale of `parent_id` (which may still be running: the child waits)."""
    upscale = FollowUps(upscale=Upscale(scale, strength, upscaler, img2img, tiled))
    [job_id] = submit_with_follow_ups(queue, parent_id, upscale, source=source, check=check).all
    return job_id


def submit_variations(
    queue: JobQueue,
    parent_id: int,
    *,
    count: int = DEFAULT_VARIATIONS,
    strength: float = DEFAULT_VARIATION_STRENGTH,
    source: str = "user",
    check: Check | None = None,
) -> list[int]:
    """Queue `count` variations of `parent_id`'s image, in one transaction."""
    variations = FollowUps(variations=Variations(count, strength))
    submitted = submit_with_follow_ups(queue, parent_id, variations, source=source, check=check)
    return list(submitted.all)
