"""Stand-ins for tests and benchmarks: a scripted runner and runner wrappers. Never used by the app.

Why inside the `app` package and not next to the tests: worker processes are started with
the spawn method and receive their runner factory pickled *by module name*, so the factory
must be importable in a fresh interpreter, from an installed copy of Easel as well as from
a checkout. Tests (`tests/engine`, `tests/ui`) and the benchmarks (`benchmarks/chaos.py`,
`benchmarks/gui.py`) share these fakes; the app itself never imports this package, and
the bundle leaves it out (packaging/easel.spec).
"""
