"""Half precision on the flow-matching families (Flux.1, SD 3.5, Z-Image, Flux.2 Klein,
Qwen-Image, Chroma), on the CPU as a GPU computes it: Easel's image equals the stock diffusers
pipeline's loaded in that same dtype and called with its defaults, and a job paused at step
k resumes in a fresh process to the uninterrupted image. A subset of
`benchmarks/dtype_matrix_flow.py`'s matrix (each family, the job kinds whose arithmetic
differs most, both dtypes); the benchmark runs every family, kind and dtype."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from app.testing.images import max_diff, pixels
from benchmarks.dtype_matrix_flow import CASES, _runner, case_named, model_folder

pytestmark = pytest.mark.filterwarnings(
    "ignore:__array__ implementation:DeprecationWarning",
    "ignore:Guidance scale .* is ignored:UserWarning",
)

# In float16 the text encoders float16 overflows (T5, Qwen3) run in float32, as on a
# float16-only GPU (`device.precision`), and so does the stock reference (as its users run it).
SUITE = [  # (case, dtype): every family once, both dtypes, the encode paths included
    ("flux1-dev-txt2img", "bfloat16"),
    ("flux1-dev-inpaint", "bfloat16"),
    ("flux1-schnell-img2img", "float16"),
    ("sd3.5-inpaint-masked", "float16"),
    ("zimage-img2img", "bfloat16"),
    ("zimage-inpaint", "float16"),  # embeddings cast for a picture, as stock's users must
    ("zimage-variation", "float16"),
    ("flux2-klein-inpaint", "float16"),
    ("qwen-txt2img", "float16"),  # embeddings cast: Qwen2.5-VL runs in float32
    ("qwen-inpaint", "bfloat16"),
    ("chroma-inpaint", "float16"),  # T5 in float32, its embeddings and masks cast
    ("flux1-fill-inpaint", "float16"),  # T5 in float32; the masked picture and mask cast
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny models, written once for the module (and read by the fresh process)."""
    return tmp_path_factory.mktemp("dtype-matrix-flow")


def test_the_matrix_covers_every_flow_family_and_its_job_kinds() -> None:
    names = {case.name for case in CASES}
    for model in ("flux1-dev", "sd3.5", "zimage", "qwen", "chroma"):  # each kind these take
        kinds = ("txt2img", "img2img", "inpaint", "inpaint-masked", "hires", "variation")
        assert {f"{model}-{kind}" for kind in kinds} <= names
    assert "sd3.5-tiled" in names
    assert {"flux2-klein-txt2img", "flux2-klein-inpaint", "flux2-klein-inpaint-masked"} <= names
    assert not any(name.startswith("flux2") and "img2img" in name for name in names)
    assert {_case(entry)[0] for entry in SUITE} <= names


def _case(entry: Any) -> tuple[str, str]:
    """(name, dtype) of a SUITE entry, a tuple or a `pytest.param`."""
    name, dtype = entry.values if hasattr(entry, "values") else entry
    return name, dtype


@pytest.mark.parametrize(("name", "dtype"), SUITE, ids=["-".join(_case(e)) for e in SUITE])
def test_in_half_precision_easel_equals_stock_diffusers_and_resumes_exactly(
    workdir: Path, fresh_process: Callable[..., Any], name: str, dtype: str
) -> None:
    case = case_named(name)
    whole, resumed = case.pause_resume(dtype, workdir, fresh=fresh_process)
    pipe = _runner(model_folder(case.model, workdir), dtype).load("m").pipe
    # Easel did compute in `dtype`: the denoiser and the VAE hold it. (On these tiny models
    # float16's pixels are within 2 of float32's, so the bound alone would not always tell
    # a run that ignored the dtype.)
    assert {pipe.transformer.dtype, pipe.vae.dtype} == {getattr(torch, dtype)}
    stock = case.stock(dtype, workdir)
    assert max_diff(pixels(whole), pixels(stock)) <= 1
    assert max_diff(pixels(whole), pixels(resumed)) <= 1
