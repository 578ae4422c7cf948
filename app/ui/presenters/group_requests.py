"""What the window asks about groups (batches, grids), on the database thread (Qt-free).

Every call goes through the engine's `groups` module, as the command line's do: a grid is
checked whole before anything is stored, and a group action is one transaction through
the transition table.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.engine.jobs.grid_spec import MAX_CELLS, GridAxisRefused, grid_cells, spec_from_axes
from app.engine.jobs.params import GenerationParams
from app.engine.jobs.states import GroupAction
from app.errors import UserError
from app.ui.presenters.queue_service import Outcome, QueueService

Axes = Sequence[tuple[str, str]]  # ("x", "steps=4,8,12"), ...


def cells_count(axes: Axes) -> tuple[int, str]:
    """How many cells the axes make, or 0 and why not (for the dialog's live line)."""
    given = [(letter, text) for letter, text in axes if text.strip()]
    if not given:
        return 0, ""
    try:
        spec = spec_from_axes(given)
    except GridAxisRefused as error:
        return 0, str(error)
    if spec.cells > MAX_CELLS:
        return spec.cells, f"at most {MAX_CELLS} cells"
    return spec.cells, ""


def check_grid(params: GenerationParams, axes: Axes) -> str:
    """ "" if the grid can be queued (settings only, no files), else why not."""
    try:
        grid_cells(params.with_concrete_seed(), spec_from_axes(_given(axes)))
    except UserError as error:
        return str(error)
    return ""


def queue_grid(service: QueueService, params: GenerationParams, axes: Axes) -> Outcome:
    """The cells and the grid job, in one transaction; or, having stored nothing, why not."""
    from app.engine.jobs.groups import submit_grid  # the SQL side: not at window start-up

    try:
        made = submit_grid(
            service.queue, params, spec_from_axes(_given(axes)),
            max_attempts=service.max_attempts, check=service.check,
        )  # fmt: skip
    except UserError as error:
        return Outcome((), (str(error),))
    return Outcome((*made.jobs, *((made.composer,) if made.composer else ())))


def act_on_groups(service: QueueService, group_ids: Sequence[int], action: GroupAction) -> Outcome:
    """`action` on every member of each group (one transaction per group)."""
    from app.engine.jobs.groups import act_on_group  # the SQL side: not at window start-up

    moved: list[int] = []
    errors: list[str] = []
    for group_id in dict.fromkeys(group_ids):
        try:
            records = act_on_group(service.queue, group_id, action, source="user")
        except UserError as error:
            errors.append(str(error))
            continue
        moved += [record.job_id for record in records]
    return Outcome(tuple(moved), tuple(errors))


def _given(axes: Axes) -> list[tuple[str, str]]:
    given = [(letter, text) for letter, text in axes if text.strip()]
    if not given or given[0][0] != "x":
        raise GridAxisRefused("a grid needs an X axis, then Y and Z")
    return given
