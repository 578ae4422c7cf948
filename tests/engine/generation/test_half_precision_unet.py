"""SD 1.x, SD 2.x v-prediction and SDXL in float16 and bfloat16 on the CPU: a subset of the
dtype matrix (`benchmarks/dtype_matrix.py`; all of it: `benchmarks/architectures.py
--dtype float16|bfloat16`). Easel's image equals the stock pipeline loaded in the same
dtype (at most 1 level of 255 apart), and a pause resumed in a fresh process equals the
uninterrupted run. The tiny models are written once for the module."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from app.testing.images import max_diff, pixels
from benchmarks import dtype_matrix

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")

CASES = {case.name: case for case in dtype_matrix.CASES}
# One of each job kind, the families and both half types spread over them: the whole
# matrix is the benchmark's (a minute or two per dtype).
SAME_AS_STOCK = [
    ("sd1-txt2img", "float16"),
    ("sd2-txt2img", "bfloat16"),
    ("sdxl-txt2img", "float16"),
    ("sdxl-img2img", "float16"),  # diffusers encodes in float32 (`force_upcast`): so must we
    ("sdxl-hires", "bfloat16"),  # and in bfloat16 too
    ("sd2-img2img", "bfloat16"),
    ("sdxl-inpaint", "bfloat16"),
    ("sd1-inpaint-masked", "float16"),
    ("sd2-hires", "float16"),
    ("sd1-controlnet", "bfloat16"),
    ("sdxl-ip-adapter", "float16"),
    ("sdxl-variation", "bfloat16"),
]
PAUSE_RESUME = [("sdxl-inpaint-masked", "float16"), ("sd2-txt2img", "bfloat16")]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield tmp_path_factory.mktemp("dtype-matrix")
    dtype_matrix.close()


def not_flat(image: np.ndarray) -> bool:
    """A NaN decodes to a flat (black) image in both pipelines: equal, and wrong."""
    return float(image.std()) > 5


@pytest.mark.parametrize(("name", "dtype"), SAME_AS_STOCK, ids=lambda v: str(v))
def test_easel_equals_the_stock_pipeline_in_the_same_dtype(
    workdir: Path, name: str, dtype: str
) -> None:
    case = CASES[name]
    ours, stock = pixels(case.easel(dtype, workdir)), pixels(case.stock(dtype, workdir))
    assert not_flat(ours)
    assert max_diff(ours, stock) <= 1


@pytest.mark.parametrize(("name", "dtype"), PAUSE_RESUME, ids=lambda v: str(v))
def test_a_pause_resumed_in_a_fresh_process_equals_the_uninterrupted_run(
    workdir: Path, name: str, dtype: str, fresh_process: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    monkeypatch.setattr(dtype_matrix, "fresh_process", fresh_process)  # the session's one
    whole, resumed = CASES[name].pause_resume(dtype, workdir)
    assert not_flat(pixels(whole))
    assert max_diff(pixels(whole), pixels(resumed)) <= 1


def test_the_matrix_has_every_kind_of_each_family() -> None:
    """SD 2.x has no ControlNet or IP-Adapter that the stock pipelines load; the rest do."""
    assert len(CASES) == 9 + 7 + 9
    assert {name.split("-", 1)[1] for name in CASES} == set(dtype_matrix.KINDS)
    assert "sd2-controlnet" not in CASES and "sd2-ip-adapter" not in CASES
