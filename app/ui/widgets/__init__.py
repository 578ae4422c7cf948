"""Widgets: the main window, its panels and dialogs."""
