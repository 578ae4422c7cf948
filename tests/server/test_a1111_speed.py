"""Step caching asked the way SD.Next's and Forge's clients ask for it in `/sdapi/v1`:
SD.Next's `para_cache_enabled`/`para_diff_threshold` and Forge's "First Block Cache /
TeaCache" script become the job's speed; the caches Easel has not (TeaCache, FasterCache,
Cache-DiT, DeepCache, Forge Neo's) are refused in one sentence and nothing is stored."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import webuiapi

from app.engine.jobs.queue import JobQueue
from app.engine.settings import Settings
from app.server.a1111_fields import UnsupportedRequest
from app.server.a1111_speed import OFF, Speed, speed_asked
from tests.server.test_server_api import Running, running, stored_by

pytestmark = [pytest.mark.timeout(120)]

FORGE = "First Block Cache / TeaCache"
ASKED: list[tuple[dict[str, Any], dict[str, Any], Speed]] = [
    ({}, {}, OFF),
    ({"para_cache_enabled": True}, {}, Speed("fast")),  # at Easel's own fast threshold
    ({"para_cache_enabled": True, "para_diff_threshold": 0.2}, {}, Speed("fast", 0.2)),
    ({"para_cache_enabled": True, "para_diff_threshold": 0}, {}, OFF),  # caches nothing
    # What a client copying SD.Next's options sends: every cache off, their thresholds set.
    ({"para_cache_enabled": False, "para_diff_threshold": 0.1, "teacache_enabled": False,
      "teacache_thresh": 0.15, "cuda_compile_backend": "deep-cache"}, {}, OFF),
    ({}, {FORGE: {"args": [True, "First Block Cache", 0.15, 1, 0, False]}}, Speed("fast", 0.15)),
    ({}, {FORGE.lower(): {"args": [True]}}, Speed("fast", 0.1)),  # the script's defaults
    ({}, {FORGE: {"args": [False, "TeaCache", 0.4]}}, OFF),
    ({}, {"Spectrum Integrated": {"args": [False, 0.25]}}, OFF),
]  # fmt: skip
REFUSED: list[tuple[dict[str, Any], dict[str, Any], str]] = [
    ({"teacache_enabled": True}, {}, "First Block Cache, not TeaCache (teacache_enabled)"),
    ({"faster_cache_enabled": True}, {}, "not FasterCache"),
    ({"cache_dit_enabled": True}, {}, "not Cache-DiT"),
    ({"cuda_compile": ["Model"], "cuda_compile_backend": "deep-cache"}, {}, "no DeepCache"),
    ({"cuda_compile": True, "cuda_compile_backend": "pruna", "pruna_cachers": ["fora"]}, {},
     "none of Pruna's cachers"),
    ({"para_cache_enabled": "yes"}, {}, "para_cache_enabled must be true or false"),
    ({"para_cache_enabled": True, "para_diff_threshold": 2}, {}, "between 0 and 1"),
    ({}, {FORGE: {"args": [True, "TeaCache", 0.4]}}, "not TeaCache (First Block Cache"),
    ({}, {FORGE: {"args": [True, "First Block Cache", 0.1, 3]}}, "any step after the first"),
    ({}, {FORGE: {"args": [True, "First Block Cache", "x"]}}, "threshold must be a number"),
    ({}, {FORGE: {"args": True}}, "needs its settings in a list"),
    ({}, {"First Block Cache Integrated": {"args": [True, 0.1, 3, 20]}}, "no warm-up"),
    ({}, {"spectrum integrated": {"args": [True]}}, "not Spectrum's forecast"),
    ({"para_cache_enabled": True}, {FORGE: {"args": [True]}}, "step caching is asked twice"),
]  # fmt: skip


@pytest.mark.parametrize(("settings", "scripts", "speed"), ASKED)
def test_sdnext_and_forge_step_caching_becomes_easels_speed(
    settings: dict[str, Any], scripts: dict[str, Any], speed: Speed
) -> None:
    assert speed_asked(settings, scripts) == speed


@pytest.mark.parametrize(("settings", "scripts", "words"), REFUSED)
def test_a_cache_easel_has_not_is_refused_in_one_sentence(
    settings: dict[str, Any], scripts: dict[str, Any], words: str
) -> None:
    with pytest.raises(UnsupportedRequest, match=re.escape(words)) as refused:
        speed_asked(settings, scripts)
    assert "\n" not in str(refused.value) and str(refused.value).count(": ") <= 1


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model folder named "fluxy" that a server resolves by name as Flux.1 (no weights:
    the server without workers only checks and stores)."""
    folder = tmp_path_factory.mktemp("speed-models")
    parts = {"transformer": ["diffusers", "FluxTransformer2DModel"],
             "vae": ["diffusers", "AutoencoderKL"],
             "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
             "text_encoder": ["transformers", "CLIPTextModel"],
             "tokenizer": ["transformers", "CLIPTokenizer"],
             "text_encoder_2": ["transformers", "T5EncoderModel"],
             "tokenizer_2": ["transformers", "T5TokenizerFast"]}  # fmt: skip
    (folder / "fluxy").mkdir()
    (folder / "fluxy" / "model_index.json").write_text(
        json.dumps({"_class_name": "FluxPipeline", **parts})
    )
    return folder


@pytest.fixture
def api(queue: JobQueue, models: Path) -> Iterator[Running]:
    with running(queue, settings=Settings(models_dir=str(models))) as served:
        yield served


def test_the_speed_reaches_the_stored_job_and_a_refusal_stores_nothing(api: Running) -> None:
    body: dict[str, Any] = {
        "prompt": "a dog", "width": 64, "height": 64, "steps": 2, "sampler_name": "Euler",
        "override_settings": {"sd_model_checkpoint": "fluxy", "para_cache_enabled": True,
                              "para_diff_threshold": 0.2},
    }  # fmt: skip
    [job] = stored_by(api, "/sdapi/v1/txt2img", body)
    assert (job.speed, job.speed_threshold) == ("fast", 0.2)
    before = len(api.queue.jobs())
    body["override_settings"] = {"sd_model_checkpoint": "fluxy", "teacache_enabled": True}
    refused = api.client.post("/sdapi/v1/txt2img", json=body)
    assert refused.status_code == 422 and "not TeaCache" in refused.json()["error"]
    # A family without step caching: the speed is refused by the model check, as /api/v1's.
    body["override_settings"] = {"para_cache_enabled": True}
    refused = api.client.post("/sdapi/v1/txt2img", json=body)
    assert refused.status_code == 422 and "step caching (speed fast) works on" in refused.text
    assert len(api.queue.jobs()) == before


def test_webuiapi_sends_forges_first_block_cache_script(api: Running) -> None:
    """The real client, its `alwayson_scripts` as Forge's extension takes them."""
    port = int(api.url.rsplit(":", 1)[1])
    client = webuiapi.WebUIApi(host="127.0.0.1", port=port, sampler="Euler", steps=2)
    scripts = {FORGE: {"args": [True, "First Block Cache", 0.3]}}
    call = threading.Thread(target=lambda: client.txt2img(
        prompt="a cat", width=64, height=64, alwayson_scripts=scripts,
        override_settings={"sd_model_checkpoint": "fluxy"}))  # fmt: skip
    call.start()
    while not (jobs := api.queue.jobs()) and call.is_alive():
        call.join(timeout=0.01)
    for job in jobs:
        api.queue.cancel(job.id or 0, source="test")
    call.join(timeout=30)
    [job] = jobs
    assert (job.model, job.speed, job.speed_threshold) == ("fluxy", "fast", 0.3)
