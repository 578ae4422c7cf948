"""Where the queue lives: opening it (checks, launch backup, standard listeners), files kept
in the database for machines that share no disk, and the shared-queue tools."""
