"""`python -m app serve`: the queue over HTTP (see docs/architecture.md, *The server*).

Beside the window, on top of the engine: it imports `app.engine`, never `app.ui`, never the
store (no SQL of its own: like the window, it reads and writes jobs through the engine's
methods), and never torch (workers run the jobs, in their own processes, as for the window
and the command line). Every request goes through the same `JobQueue` and transition table.
"""
