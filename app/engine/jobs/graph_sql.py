"""The job graph's writes at submit: parent edges and stored init images, checked first.

They run inside `JobQueue.submit_many`'s transaction, so a job is stored with all its
parents and its input, or (on bad input) not at all. Reactions to parents finishing
(unblock, cascade cancel, reconciliation) are in `graph`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    false,
    func,
    insert,
    not_,
    or_,
    select,
    true,
)

from app.engine.jobs.params import INIT_UPLOADED, GenerationParams, InvalidParameters
from app.engine.jobs.run_inputs import NO_INPUTS, RunInputs
from app.engine.jobs.states import JobStatus
from app.models.db import Database, HotTransaction
from app.models.tables import JOB, JOB_GROUP, JOB_INPUT, JOB_PARENT


class InputKind(StrEnum):
    """What an image stored with a job (a job_input row) is for."""

    INIT = "init"  # img2img's and inpaint's starting image
    MASK = "mask"  # inpaint: white where to repaint
    LAST = "last"  # a first-and-last-frame clip's last frame


def control_kind(layer: int) -> str:
    """The job_input kind of control layer `layer`'s image: "control0", "control1", ..."""
    return f"control{layer}"


def reference_kind(index: int) -> str:
    """The job_input kind of reference image `index` (IP-Adapter): "reference0", ..."""
    return f"reference{index}"


def edit_kind(index: int) -> str:
    """The job_input kind of an edit's input image `index` after its init image: "edit0"
    is the edit's second picture, "edit1" its third."""
    return f"edit{index}"


class InvalidDependency(InvalidParameters):
    """A parent that does not exist or cannot be waited for, or a dependency cycle."""


def digest(png: bytes) -> str:
    """How `GenerationParams.init_image` names an uploaded image: `upload:<sha256>`."""
    return INIT_UPLOADED + hashlib.sha256(png).hexdigest()


class GraphStatements:
    def __init__(self, db: Database) -> None:
        # Compiled once per process and dialect (`prepare_once`): the same for every store.
        self.status = db.prepare_once(
            "graph.status", lambda: select(JOB.c.status).where(JOB.c.id == bindparam("job_id"))
        )
        self.parents = db.prepare_once(
            "graph.parents",
            lambda: select(JOB_PARENT.c.parent_id).where(
                JOB_PARENT.c.job_id == bindparam("job_id")
            ),
        )
        self.insert_parent = db.prepare_once(
            "graph.insert_parent", lambda: insert(JOB_PARENT), ("job_id", "parent_id", "settled")
        )
        self.insert_group = db.prepare_once(
            "graph.insert_group",
            lambda: insert(JOB_GROUP).returning(JOB_GROUP.c.id),
            ("kind", "label", "spec", "created_at"),
        )
        self.insert_input = db.prepare_once(
            "graph.insert_input", lambda: insert(JOB_INPUT), ("job_id", "kind", "png")
        )
        self.unfinished_parents = db.prepare_once(
            "graph.unfinished_parents",
            lambda: (
                select(JOB_PARENT.c.parent_id)
                .join(JOB, JOB.c.id == JOB_PARENT.c.parent_id)
                .where(
                    JOB_PARENT.c.job_id == bindparam("job_id"),
                    JOB.c.status != JobStatus.SUCCESS.value,
                    # A parent waited for until settled: not yet settled (see `is_settled`).
                    or_(JOB_PARENT.c.settled == false(), not_(settled_sql())),
                )
                .order_by(JOB_PARENT.c.parent_id)
            ),
        )

    def waiting_for(self, tx: HotTransaction, job_id: int) -> list[int]:
        """The parents of `job_id` that have not succeeded (UNBLOCK waits for none)."""
        rows = tx.execute(self.unfinished_parents, {"job_id": job_id}).fetchall()
        return [row[0] for row in rows]

    def check_parents(self, tx: HotTransaction, parents: Sequence[int]) -> None:
        """Every parent exists and may still succeed; refused with a reason otherwise."""
        for parent in parents:
            row = tx.execute(self.status, {"job_id": parent}).fetchone()
            if row is None:
                raise InvalidDependency(f"there is no job {parent} to wait for")
            if row[0] == JobStatus.CANCELLED.value:
                raise InvalidDependency(f"job {parent} was cancelled; nothing can wait for it")

    def link(
        self,
        tx: HotTransaction,
        job_id: int,
        parents: Sequence[int],
        inputs: RunInputs = NO_INPUTS,
        *,
        settled: bool = False,
    ) -> None:
        """Store the new job's edges and inputs, refusing an edge that would close a cycle."""
        cycle = cycle_through(job_id, parents, lambda job: self._parents_of(tx, job))
        if cycle:
            path = " -> ".join(f"#{job}" for job in cycle)
            raise InvalidDependency(f"job {job_id} would wait for itself ({path})")
        for parent in parents:
            tx.execute(
                self.insert_parent, {"job_id": job_id, "parent_id": parent, "settled": settled}
            )
        for kind, png in (
            (InputKind.INIT, inputs.init_image), (InputKind.MASK, inputs.mask),
            (InputKind.LAST, inputs.last_image),
        ):  # fmt: skip
            if png is not None:
                tx.execute(self.insert_input, {"job_id": job_id, "kind": kind.value, "png": png})
        for layer, png in enumerate(inputs.control_images):
            values = {"job_id": job_id, "kind": control_kind(layer), "png": png}
            tx.execute(self.insert_input, values)
        for index, png in enumerate(inputs.reference_images):
            values = {"job_id": job_id, "kind": reference_kind(index), "png": png}
            tx.execute(self.insert_input, values)
        for index, png in enumerate(inputs.edit_images):
            values = {"job_id": job_id, "kind": edit_kind(index), "png": png}
            tx.execute(self.insert_input, values)

    def _parents_of(self, tx: HotTransaction, job_id: int) -> list[int]:
        return [row[0] for row in tx.execute(self.parents, {"job_id": job_id}).fetchall()]


def settled_sql(job: Any = JOB) -> ColumnElement[bool]:
    """SQL for `is_settled` on the `job` table (or an alias of it)."""
    s = JobStatus
    return or_(
        # OR of equalities, not IN: IN's expanding parameter needs Core's execution.
        job.c.status == s.SUCCESS.value,
        job.c.status == s.CANCELLED.value,
        and_(job.c.status == s.FAILED.value,
             or_(job.c.given_up == true(), job.c.error_transient == false())),
        and_(job.c.status == s.TIMEOUT.value, job.c.given_up == true()),
    )  # fmt: skip


def is_settled(status: str, given_up: bool, error_transient: bool | None) -> bool:
    """Nothing more will happen to this job by itself: it succeeded, was cancelled, failed
    for good (a lasting error, or retries given up) or timed out and was given up. A grid
    waits for its cells to be settled; a user may still retry a settled failure."""
    s = JobStatus
    if status in (s.SUCCESS, s.CANCELLED):
        return True
    if status == s.FAILED:
        return given_up or error_transient is False
    return status == s.TIMEOUT and given_up


def latest_cells(db: Database, group_id: int) -> list[int]:
    """The newest job of each cell of a group (a re-run takes its original's cell)."""
    query = (
        select(func.max(JOB.c.id))
        .where(JOB.c.group_id == group_id, JOB.c.group_cell.is_not(None))
        .group_by(JOB.c.group_cell)
        .order_by(JOB.c.group_cell)
    )
    with db.read() as conn:
        return [int(job_id) for job_id in conn.execute(query).scalars()]


@dataclass(frozen=True)
class StoredLinks:
    parents: list[int]
    inputs: RunInputs  # what was stored with the job (never a parent's output)


def stored_links(db: Database, job_id: int) -> StoredLinks:
    """A stored job's parents and stored inputs, to submit it again (re-run)."""
    parents = select(JOB_PARENT.c.parent_id).where(JOB_PARENT.c.job_id == job_id)
    inputs = select(JOB_INPUT.c.kind, JOB_INPUT.c.png).where(JOB_INPUT.c.job_id == job_id)
    with db.read() as conn:
        stored = {kind: bytes(png) for kind, png in conn.execute(inputs)}
        return StoredLinks(
            sorted(conn.execute(parents).scalars()),
            RunInputs(
                stored.get(InputKind.INIT.value),
                stored.get(InputKind.MASK.value),
                _numbered(stored, control_kind),
                _numbered(stored, reference_kind),
                _numbered(stored, edit_kind),
                stored.get(InputKind.LAST.value),
            ),
        )


def _numbered(stored: dict[str, bytes], kind: Callable[[int], str]) -> tuple[bytes, ...]:
    pngs: list[bytes] = []
    while kind(len(pngs)) in stored:
        pngs.append(stored[kind(len(pngs))])
    return tuple(pngs)


def stored_input(db: Database, job_id: int, kind: str) -> bytes | None:
    """The image of `kind` (an `InputKind`, or `control_kind`) stored with the job."""
    query = select(JOB_INPUT.c.png).where(
        JOB_INPUT.c.job_id == job_id, JOB_INPUT.c.kind == str(kind)
    )
    with db.read() as conn:
        png = conn.execute(query).scalar_one_or_none()
    return None if png is None else bytes(png)


def check_inputs(
    params: GenerationParams, parents: Sequence[int], inputs: RunInputs = NO_INPUTS
) -> None:
    """The inputs the parameters name are the ones given: an init image (a parent's, or
    these bytes), a mask, the control layers' and the reference images (these bytes)."""
    init_png, mask_png = inputs.init_image, inputs.mask
    parent = params.init_parent
    if parent is not None and parent not in parents:
        raise InvalidDependency(
            f"the init image is job {parent}'s output, but job {parent} is not a parent"
        )
    uploaded = params.init_image.startswith(INIT_UPLOADED)
    if uploaded != (init_png is not None):
        raise InvalidParameters(
            "an uploaded init image needs its bytes, and bytes need init_image='upload:...'"
        )
    if init_png is not None and digest(init_png) != params.init_image:
        raise InvalidParameters("the init image's bytes do not match its digest in init_image")
    if bool(params.mask) != (mask_png is not None):
        raise InvalidParameters("a mask needs its bytes, and mask bytes need mask='upload:...'")
    if mask_png is not None and digest(mask_png) != params.mask:
        raise InvalidParameters("the mask's bytes do not match its digest in mask")
    check_last_image(params, inputs.last_image)
    check_guide_images(params, inputs.control_images, inputs.reference_images)
    check_edit_images(params, inputs.edit_images)


def check_edit_images(params: GenerationParams, pngs: Sequence[bytes]) -> None:
    """An edit's further input images' bytes are the ones its parameters name, in order
    (at submit, and again where a worker is handed them)."""
    named = params.more_edit_images
    if len(named) != len(pngs):
        raise InvalidParameters(
            f"{1 + len(named)} input images named for the edit, but {1 + len(pngs)} given"
        )
    for index, (name, png) in enumerate(zip(named, pngs, strict=True), start=2):
        if digest(png) != name:
            raise InvalidParameters(f"input image {index}'s bytes are not the image it names")


def check_last_image(params: GenerationParams, last_png: bytes | None) -> None:
    """A clip's last image's bytes are the ones `params.last_image` names (at submit, and
    again in the runner)."""
    if bool(params.last_image) != (last_png is not None):
        raise InvalidParameters(
            "a last image needs its bytes, and its bytes need last_image='upload:...'"
        )
    if last_png is not None and digest(last_png) != params.last_image:
        raise InvalidParameters("the last image's bytes do not match its digest in last_image")


def check_guide_images(
    params: GenerationParams, control_pngs: Sequence[bytes], reference_pngs: Sequence[bytes]
) -> None:
    """The control layers' and reference images' bytes are the ones the parameters name by
    digest, one each, in order (at submit, and again where a worker is handed them)."""
    guides = (
        ("control layers", "control layer", [layer.image for layer in params.control_layers],
         control_pngs),
        ("reference images", "reference image", [r.image for r in params.references],
         reference_pngs),
    )  # fmt: skip
    for plural, label, named, pngs in guides:
        if len(named) != len(pngs):
            raise InvalidParameters(f"{len(named)} {plural} named, but {len(pngs)} images given")
        for index, (name, png) in enumerate(zip(named, pngs, strict=True)):
            if digest(png) != name:
                raise InvalidParameters(f"{label} {index}'s image is not the one it names")


def cycle_through(
    job_id: int, parents: Iterable[int], parents_of: Callable[[int], Iterable[int]]
) -> list[int]:
    """A path job_id -> parent -> ... -> job_id if the edges would close a cycle, else []."""
    trail: dict[int, int] = {}  # ancestor -> the job that named it
    frontier = []
    for parent in parents:
        trail.setdefault(parent, job_id)
        frontier.append(parent)
    while frontier:
        ancestor = frontier.pop()
        if ancestor == job_id:
            return _path(trail, job_id)
        for grand in parents_of(ancestor):
            if grand not in trail:
                trail[grand] = ancestor
                frontier.append(grand)
    return []


def _path(trail: dict[int, int], job_id: int) -> list[int]:
    path = [job_id]
    step = trail[job_id]
    while step != job_id:
        path.append(step)
        step = trail[step]
    path.append(job_id)
    return path[::-1]
