"""What a finished job leaves behind: its output files, their names and metadata."""
