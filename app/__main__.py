import multiprocessing
import sys

from app.cli import main

if __name__ == "__main__":
    # Spawned workers inside a frozen bundle re-enter here; let them run their own code.
    multiprocessing.freeze_support()
    sys.exit(main())
