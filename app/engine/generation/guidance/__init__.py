"""Guiding the loop beyond the prompt: ControlNet layers and IP-Adapter reference images."""
