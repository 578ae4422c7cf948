"""benchmarks/speed.py's `--smoke` run (a tiny Flux, 4 steps): every figure printed, the
cached image stock diffusers' with the same hook and the resumed one the uninterrupted
one (both exactly), the cache skipping steps at its threshold, and the compile figures
(traced, not built). In this process: the
tiny model takes a second where a new interpreter's imports take many."""

from __future__ import annotations

import pytest

from benchmarks import speed

FIGURES = (
    "cache_model_calls_ratio", "cache_wall_ratio", "cache_vs_uncached_psnr_db",
    "cache_same_as_diffusers_max_diff", "cache_pause_resume_max_diff",
    "compile_speedup_ratio", "compile_first_job_extra_s",
)  # fmt: skip


@pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")
def test_smoke_run_prints_every_figure(capsys: pytest.CaptureFixture[str]) -> None:
    assert speed.main(["--smoke"]) == 0
    lines = [line.split(": ", 1) for line in capsys.readouterr().out.splitlines()]
    figures = {name: value for name, value in lines}
    assert not [name for name in FIGURES if name not in figures], figures
    assert figures["cache_same_as_diffusers_max_diff"] == "0"
    assert figures["cache_pause_resume_max_diff"] == "0"
    assert 0 < float(figures["cache_model_calls_ratio"]) < 1  # some steps were skipped
    assert float(figures["cache_wall_ratio"]) > 0
    assert float(figures["cache_vs_uncached_psnr_db"]) > 0
    # Traced by dynamo's "eager" backend (no kernels built): the same image as eager.
    assert figures["compile_backend"] == "eager" and figures["compile_vs_eager_max_diff"] == "0"
    assert float(figures["compile_speedup_ratio"]) > 0
