"""Qt plumbing: the store thread, the worker feed and live progress, thumbnails, GC, theme."""
