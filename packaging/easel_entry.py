"""The bundle's entry point: the GUI, the CLI and spawned workers all start here."""

import multiprocessing
import sys

from app.cli import main

if __name__ == "__main__":
    # A spawned worker re-runs this executable; freeze_support hands it to multiprocessing.
    multiprocessing.freeze_support()
    sys.exit(main())
