"""Tests of the stand-ins in app.testing."""
