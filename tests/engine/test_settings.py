"""settings.json: the new-job defaults are saved and read back, and older files still load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.engine.settings import (
    InvalidSettings,
    JobDefaults,
    NewJobValues,
    Settings,
    load_settings,
    save_settings,
)


def test_a_settings_file_from_before_the_new_job_defaults_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"workers": 2, "keep_finished_days": 30}), encoding="utf-8")
    loaded = load_settings(path)
    assert (loaded.workers, loaded.keep_finished_days) == (2, 30)
    assert loaded.new_jobs_start_with is NewJobValues.LAST_USED
    assert loaded.new_job_defaults == JobDefaults()


def test_new_job_defaults_are_saved_and_read_back(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    chosen = Settings().with_changes(
        new_jobs_start_with=NewJobValues.DEFAULTS,
        new_job_defaults=JobDefaults("other-model", "DDIM", 12, 6.5, 640, 512, 3),
    )
    save_settings(chosen, path)
    raw = json.loads(path.read_text(encoding="utf-8"))
    assert raw["new_jobs_start_with"] == "defaults"
    assert raw["new_job_defaults"]["steps"] == 12
    assert load_settings(path) == chosen


def test_partial_defaults_keep_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"new_job_defaults": {"steps": 30, "later": 1}}), encoding="utf-8")
    assert load_settings(path).new_job_defaults == JobDefaults(steps=30)


@pytest.mark.parametrize(
    ("defaults", "problem"),
    [(JobDefaults(steps=999), "new-job defaults: steps must be between 1 and 150, not 999"),
     (JobDefaults(width=641), "new-job defaults: width 641 is not a multiple of 8"),
     (JobDefaults(sampler="Heun"), "new-job defaults: unknown scheduler 'Heun'"),
     (JobDefaults(images=17), "new-job defaults: images must be between 1 and 16, not 17")],
)  # fmt: skip
def test_defaults_out_of_range_are_refused(defaults: JobDefaults, problem: str) -> None:
    with pytest.raises(InvalidSettings, match=problem):
        Settings().with_changes(new_job_defaults=defaults)


def test_an_unreadable_start_choice_falls_back_to_the_defaults(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"workers": 2, "new_jobs_start_with": "tomorrow"}), "utf-8")
    assert load_settings(path) == Settings()  # as any invalid settings file (logged)
