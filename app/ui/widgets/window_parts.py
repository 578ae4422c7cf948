"""What a section installed into the main window uses of it, handed over instead of the
window itself: the window imports its sections, so a section that took the window would
import it back (a circle, if only for type checking)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtWidgets import QMainWindow

from app.ui.viewmodels.jobs_viewmodel import JobsViewModel
from app.ui.widgets.jobs_panel import JobsPanel
from app.ui.widgets.prompt_panel import PromptPanel


@dataclass(frozen=True)
class WindowParts:
    window: QMainWindow  # dialogs' parent; a section's menu goes on its menu bar
    prompt: PromptPanel  # the form
    jobs: JobsPanel  # the job list: which job is selected
    vm: JobsViewModel  # submitting, and hearing of settled jobs
    show_error: Callable[[str], None]
    show_note: Callable[[str], None]
