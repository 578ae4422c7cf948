"""The history as tools: search, favourites, retention, learned ETAs and stats (issue 15)."""
