"""`python -m app serve`: the queue over HTTP (see docs/architecture.md, *The server*).

Beside the window, on top of the engine: it imports `app.engine` and `app.models`, never
`app.ui`, and never torch (workers run the jobs, in their own processes, as for the window
and the command line). Every request goes through the same `JobQueue` and transition table.
"""
