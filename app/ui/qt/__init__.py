"""Qt plumbing: the store thread, the worker feed, thumbnails, GC, theme and icons."""
