"""What a finished job leaves behind: its output's kind (`kinds`, collected in `registry`),
each kind's own module (`image`), and the names its files get (`names`)."""
