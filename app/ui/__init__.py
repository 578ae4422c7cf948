"""The desktop window (PySide6). Importing this package does nothing by itself.

Where things live; each package imports only from those listed after it:
- `main.py`: the entry point (`run_gui`); `wiring.py` adapts the engine to the window.
- `widgets/`: what you see: the main window, its panels, dialogs, banner, tray notices, and
  the controller that keeps the image and timeline on the selected job.
- `viewmodels/`: Qt objects that hold what the widgets show (the job list, the filter) and
  carry out the user's requests through the store thread.
- `itemmodels/`: Qt item models for the list and tree views, and their painted delegates.
- `qt/`: Qt plumbing without a screen of its own: the store thread, the worker feed and live
  progress, thumbnails, the GUI-thread garbage collector, theme colours and icons.
- `presenters/`: no Qt at all (a test checks it): row snapshots and their wording, which
  actions apply, PNG parameters, the queue service (the GUI's only door to the job store)
  and the small interfaces the window needs from the engine.
"""
