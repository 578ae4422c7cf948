"""Loading pipelines offline: from diffusers folders, single checkpoint files and split files,
kept in memory between jobs; and one sentence for a model that fails to load."""
