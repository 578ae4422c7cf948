"""Easel: local image generation where no job ever vanishes."""

__version__ = "0.1.0"
