"""The table of A1111's request fields: README shows it as the code has it, it covers exactly
A1111's two request models, and a request is checked against it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.server.a1111 import Img2Img, Txt2Img
from app.server.a1111_fields import (
    FIELDS,
    Endpoint,
    Treatment,
    UnsupportedRequest,
    check_fields,
    fields_of,
    markdown_table,
)

README = Path(__file__).resolve().parents[2] / "README.md"

# A1111 1.10's StableDiffusionTxt2ImgProcessingAPI and StableDiffusionImg2ImgProcessingAPI
# (modules/api/models.py over modules/processing.py), written out here by hand so that the
# table cannot drift from them unseen.
COMMON = (
    "prompt", "negative_prompt", "styles", "seed", "subseed", "subseed_strength",
    "seed_resize_from_h", "seed_resize_from_w", "sampler_name", "scheduler", "batch_size",
    "n_iter", "steps", "cfg_scale", "width", "height", "restore_faces", "tiling",
    "do_not_save_samples", "do_not_save_grid", "eta", "denoising_strength", "s_min_uncond",
    "s_churn", "s_tmax", "s_tmin", "s_noise", "override_settings",
    "override_settings_restore_afterwards", "refiner_checkpoint", "refiner_switch_at",
    "disable_extra_networks", "firstpass_image", "comments", "sampler_index", "script_name",
    "script_args", "send_images", "save_images", "alwayson_scripts", "force_task_id", "infotext"
)  # fmt: skip
TXT2IMG = (
    *COMMON,
    "enable_hr", "firstphase_width", "firstphase_height", "hr_scale", "hr_upscaler",
    "hr_second_pass_steps", "hr_resize_x", "hr_resize_y", "hr_checkpoint_name",
    "hr_sampler_name", "hr_scheduler", "hr_prompt", "hr_negative_prompt"
)  # fmt: skip
IMG2IMG = (
    *COMMON,
    "init_images", "resize_mode", "image_cfg_scale", "mask", "mask_blur_x", "mask_blur_y",
    "mask_blur", "mask_round", "inpainting_fill", "inpaint_full_res",
    "inpaint_full_res_padding", "inpainting_mask_invert", "initial_noise_multiplier",
    "latent_mask", "include_init_images"
)  # fmt: skip


def test_the_table_covers_exactly_a1111s_fields_and_the_models_read_only_those() -> None:
    assert set(fields_of(Endpoint.TXT2IMG)) == set(TXT2IMG)
    assert set(fields_of(Endpoint.IMG2IMG)) == set(IMG2IMG)
    assert len({f.name for f in FIELDS}) == len(FIELDS)
    assert set(Txt2Img.model_fields) <= set(TXT2IMG)
    assert set(Img2Img.model_fields) <= set(IMG2IMG)
    # What Easel reads it honours; a refused field has a sentence to answer with.
    honoured = {f.name for f in FIELDS if f.treatment is Treatment.HONOURED}
    assert set(Txt2Img.model_fields) | set(Img2Img.model_fields) <= honoured
    for field in FIELDS:
        if field.treatment is Treatment.REFUSED:
            assert field.note.endswith("."), field.name  # one sentence


def test_readme_shows_the_table_the_code_has() -> None:
    text = README.read_text(encoding="utf-8")
    shown = re.search(r"<!-- a1111-fields:.*?-->\n<details>.*?\n\n(.*?)\n\n</details>", text, re.S)
    assert shown is not None, "README lost its A1111 field table"
    assert shown.group(1) == markdown_table()


def test_refused_fields_pass_at_their_neutral_values_and_are_refused_set() -> None:
    # What webuiapi sends by default when it means "off" goes through.
    check_fields(
        {"restore_faces": False, "tiling": False, "eta": 1.0, "s_churn": 0, "s_noise": 1,
         "styles": [], "seed_resize_from_h": 0, "hr_checkpoint_name": None, "hr_prompt": "",
         "save_images": False, "script_args": [], "override_settings": {}},
        Endpoint.TXT2IMG, "Euler a",
    )  # fmt: skip
    with pytest.raises(UnsupportedRequest, match=r"^Easel does not make tileable images"):
        check_fields({"tiling": True}, Endpoint.TXT2IMG, "Euler")
    with pytest.raises(UnsupportedRequest, match="first pass's prompt"):
        check_fields({"hr_prompt": "another"}, Endpoint.TXT2IMG, "Euler")
    with pytest.raises(UnsupportedRequest, match="'hr_prompt' is not in A1111's img2img"):
        check_fields({"hr_prompt": ""}, Endpoint.IMG2IMG, "Euler")
    with pytest.raises(UnsupportedRequest, match="'a', 'b' are not in"):
        check_fields({"b": 1, "a": 2}, Endpoint.TXT2IMG, "Euler")
    # eta: what the sampler runs at
    check_fields({"eta": 0.0}, Endpoint.TXT2IMG, "DDIM")
    with pytest.raises(UnsupportedRequest, match="eta"):
        check_fields({"eta": 1.0}, Endpoint.TXT2IMG, "DDIM")
