"""The desktop window (PySide6). Widgets bind to view-models; no widget opens the database."""

from app.ui.qt_workarounds import guard_none_refcount

guard_none_refcount()
