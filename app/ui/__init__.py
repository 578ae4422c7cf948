"""The desktop window (PySide6). Importing this package does nothing by itself.

Where things live (dependencies point down this list, never up):
- `main.py`: the entry point (`run_gui`); `wiring.py` adapts the engine to the window.
- `widgets/`: what you see: the main window, its panels, dialogs, banner, tray notices.
- `viewmodels/`: Qt objects that hold what the widgets show (job list, selected job, live
  progress) and carry out requests through the store thread.
- `itemmodels/`: Qt item models for the list and tree views, and their painted delegates.
- `qt/`: Qt plumbing without a screen of its own: the store thread, the worker feed,
  thumbnails, the GUI-thread garbage collector, theme colours and icons.
- `presenters/`: no Qt at all: row snapshots and their wording, which actions apply, PNG
  parameters, the queue service (the GUI's only door to the job store) and the small
  interfaces the window needs from the engine. Importable without PySide6.
"""
