"""The desktop window (PySide6). Widgets bind to view-models; no widget opens the database."""
