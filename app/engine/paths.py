"""Where Easel keeps its data and finds its bundled resources.

`EASEL_HOME` (or the CLI's `--home`) overrides the platform data folder, so tests and
portable installs never touch the user's real data.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import platformdirs

APP_NAME = "Easel"
HOME_ENV = "EASEL_HOME"


def data_dir() -> Path:
    override = os.environ.get(HOME_ENV)
    base = (
        Path(override) if override else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    )
    base.mkdir(parents=True, exist_ok=True)
    return base


def database_path() -> Path:
    return data_dir() / "easel.db"


def outputs_dir() -> Path:
    return _subdir("outputs")


def checkpoints_dir() -> Path:
    return _subdir("checkpoints")


def models_dir() -> Path:
    """The user's own models folder: one diffusers pipeline folder per model."""
    return _subdir("models")


def logs_dir(*, create: bool = True) -> Path:
    return _subdir("logs", create=create)


def resources_dir() -> Path:
    """`resources/` beside the package, or inside a PyInstaller bundle."""
    bundle_root = getattr(sys, "_MEIPASS", None)
    if bundle_root:
        return Path(bundle_root) / "resources"
    return Path(__file__).resolve().parents[2] / "resources"


def bundled_models_dir() -> Path:
    return resources_dir() / "models"


def _subdir(name: str, *, create: bool = True) -> Path:
    path = data_dir() / name
    if create:
        path.mkdir(parents=True, exist_ok=True)
    return path
