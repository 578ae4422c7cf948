"""ControlNet layers from the command line: preprocessed once, stored with the job, shown;
a ControlNet that is missing or made for another architecture refused, nothing stored."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from app.cli.control import parse_control
from app.engine.jobs.graph import control_images_of
from app.engine.jobs.params import InvalidParameters
from app.engine.paths import models_dir
from app.engine.store.opening import open_queue

from .test_cli_jobs import run_cli


def install_controlnet(name: str, *, sdxl: bool = False) -> Path:
    """A ControlNet as the listing sees it: its config (the CLI never loads weights)."""
    folder = models_dir() / "controlnet" / name
    folder.mkdir(parents=True)
    config: dict[str, object] = {"_class_name": "ControlNetModel", "cross_attention_dim": 768}
    if sdxl:
        config.update(addition_embed_type="text_time", cross_attention_dim=2048)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def drawing(path: Path) -> Path:
    image = Image.new("RGB", (64, 64), (240, 240, 240))
    image.paste((20, 20, 20), (16, 16, 48, 48))
    image.save(path)
    return path


def test_submit_with_control_layers_stores_their_preprocessed_images_and_show_lists_them(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    install_controlnet("edges-sd15")
    install_controlnet("pose-sd15")
    picture, pose = drawing(tmp_path / "in.png"), drawing(tmp_path / "pose.png")
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--control", f"canny:{picture}:0.7:0.1:0.9",
        "--control", f"none:{pose}:0.5", "--control-model", "edges-sd15",
        "--control-model", "pose-sd15",
    )  # fmt: skip
    assert (code, err) == (0, "")
    picture.unlink()  # the job depends on neither file any more
    queue = open_queue()
    job = queue.get(int(out.strip()))
    edges, kept = control_images_of(queue, job)
    queue.db.dispose()
    with Image.open(io.BytesIO(edges)) as opened:
        values = np.asarray(opened)
    assert set(np.unique(values)) == {0, 255}  # canny: white edges on black
    assert values[14:18, 30].max() == 255 and values[32, 32].max() == 0  # the edge, inside
    with Image.open(io.BytesIO(kept)) as opened:
        assert np.asarray(opened)[32, 32].tolist() == [20, 20, 20]  # "none": as given
    code, out, _ = run_cli(capsys, "show", str(job.id))
    assert "control 0   canny by edges-sd15, weight 0.7, steps 0.1-0.9" in out
    assert "control 1   none by pose-sd15, weight 0.5, steps 0-1" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--control-model", "xl-canny"], "ControlNet 'xl-canny' is for SDXL, but model "
                                          "'easel-tiny' is SD 1.x"),
        (["--control-model", "nowhere"], "ControlNet 'nowhere' was not found; looked in:"),
        ([], "--control needs --control-model NAME"),
    ],
)  # fmt: skip
def test_a_controlnet_missing_or_for_another_architecture_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, extra: list[str], message: str
) -> None:
    install_controlnet("xl-canny", sdxl=True)
    picture = drawing(tmp_path / "in.png")
    code, out, err = run_cli(capsys, "submit", "a cat", "--control", f"canny:{picture}", *extra)
    assert code != 0 and out == ""
    assert message in err and len(err.strip().splitlines()) == 1
    assert run_cli(capsys, "jobs")[1].strip() == ""


def test_the_control_syntax() -> None:
    assert parse_control("canny:a.png") == ("canny", Path("a.png"), 1.0, 0.0, 1.0)
    assert parse_control("scribble:C:/art/a.png:0.4") == (
        "scribble", Path("C:/art/a.png"), 0.4, 0.0, 1.0,
    )  # fmt: skip
    assert parse_control("none:a.png:1.5:0.2:0.6") == ("none", Path("a.png"), 1.5, 0.2, 0.6)
    with pytest.raises(InvalidParameters, match="give WEIGHT, or WEIGHT:START:END"):
        parse_control("canny:a.png:0.5:0.2")
    with pytest.raises(InvalidParameters, match="is not MODULE:IMAGE"):
        parse_control("a.png")


def install_ip_adapter(name: str) -> Path:
    """An IP-Adapter as the listing sees it: a weight file beside an image_encoder folder
    (the header says SD 1.x: 4 image tokens of 768)."""
    import torch
    from safetensors.torch import save_file

    folder = models_dir() / "ipadapter" / "models"
    (folder / "image_encoder").mkdir(parents=True)
    weights = folder / f"{name}.safetensors"
    save_file({"image_proj.proj.weight": torch.zeros(4 * 768, 1)}, str(weights))
    return weights


def test_submit_with_a_reference_image_stores_it_and_show_lists_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from app.engine.jobs.graph import reference_images_of

    install_ip_adapter("ip-adapter_sd15")
    style = drawing(tmp_path / "style.png")
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--reference", f"{style}:0.6",
        "--reference-model", "ip-adapter_sd15",
    )  # fmt: skip
    assert (code, err) == (0, "")
    queue = open_queue()
    job = queue.get(int(out.strip()))
    [stored] = reference_images_of(queue, job)
    queue.db.dispose()
    with Image.open(io.BytesIO(stored)) as opened:
        assert opened.size == (64, 64) and opened.mode == "RGB"
    code, out, _ = run_cli(capsys, "show", str(job.id))
    assert "reference 0 ip-adapter_sd15, weight 0.6" in out
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--reference", str(style), "--reference-model", "nowhere"
    )
    assert code != 0 and "IP-Adapter 'nowhere'" in err and "was not found" in err


def test_control_and_a_reference_go_with_an_init_image_and_a_mask(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """img2img and inpaint guided from the command line: every input stored, shown."""
    from app.engine.jobs.graph import init_image_of, mask_of, reference_images_of

    install_controlnet("edges-sd15")
    install_ip_adapter("ip-adapter_sd15")
    picture, style = drawing(tmp_path / "in.png"), drawing(tmp_path / "style.png")
    mask = tmp_path / "mask.png"
    Image.new("L", (64, 64), 255).save(mask)
    guidance = [
        "--control", f"canny:{picture}:0.7", "--control-model", "edges-sd15",
        "--reference", f"{style}:0.5", "--reference-model", "ip-adapter_sd15",
    ]  # fmt: skip
    for extra in (["--strength", "0.6"], ["--mask", str(mask)]):
        code, out, err = run_cli(
            capsys, "submit", "a cat", "--init-image", str(picture), *extra, *guidance
        )
        assert (code, err) == (0, "")
        queue = open_queue()
        job = queue.get(int(out.strip()))
        assert init_image_of(queue, job) is not None
        assert (mask_of(queue, job) is not None) == ("--mask" in extra)
        assert len(control_images_of(queue, job)) == 1
        assert len(reference_images_of(queue, job)) == 1
        queue.db.dispose()
        code, out, _ = run_cli(capsys, "show", str(job.id))
        assert "control 0   canny by edges-sd15, weight 0.7" in out
        assert "reference 0 ip-adapter_sd15, weight 0.5" in out


def test_several_reference_images_each_with_its_adapter_and_weight(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from app.engine.jobs.graph import reference_images_of
    from app.engine.jobs.params import decode_reference

    install_ip_adapter("ip-adapter_sd15")
    style, face = drawing(tmp_path / "style.png"), tmp_path / "face.png"
    Image.new("RGB", (48, 40), (10, 200, 30)).save(face)
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--reference", f"{style}:0.6", "--reference", str(face),
        "--reference-model", "ip-adapter_sd15",
    )  # fmt: skip
    assert (code, err) == (0, "")
    queue = open_queue()
    job = queue.get(int(out.strip()))
    first, second = reference_images_of(queue, job)
    queue.db.dispose()
    assert [(r.model, r.weight) for r in decode_reference(job.reference)] == [
        ("ip-adapter_sd15", 0.6), ("ip-adapter_sd15", 1.0),
    ]  # fmt: skip
    with Image.open(io.BytesIO(second)) as opened:
        assert opened.size == (48, 40) and first != second
    code, out, _ = run_cli(capsys, "show", str(job.id))
    assert "reference 0 ip-adapter_sd15, weight 0.6" in out
    assert "reference 1 ip-adapter_sd15, weight 1" in out
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--reference", str(style), "--reference", str(face),
        "--reference", str(face), "--reference-model", "ip-adapter_sd15",
        "--reference-model", "ip-adapter_sd15",
    )  # fmt: skip
    assert code != 0 and "3 --reference images but 2 --reference-model names" in err


def test_a_control_type_for_a_controlnet_union_is_stored_and_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from app.engine.jobs.params import decode_control

    install_controlnet("edges-sd15")
    picture = drawing(tmp_path / "in.png")
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--control", f"none:{picture}", "--control", f"canny:{picture}",
        "--control-model", "edges-sd15", "--control-type", "depth", "--control-type", "canny",
    )  # fmt: skip
    assert (code, err) == (0, "")
    queue = open_queue()
    job = queue.get(int(out.strip()))
    queue.db.dispose()
    assert [layer.control_type for layer in decode_control(job.control)] == ["depth", "canny"]
    code, out, _ = run_cli(capsys, "show", str(job.id))
    assert "steps 0-1, type depth" in out
    code, out, err = run_cli(
        capsys, "submit", "a cat", "--control", f"none:{picture}", "--control-model",
        "edges-sd15", "--control-type", "pose",
    )  # fmt: skip
    assert code != 0 and "control type 'pose' is unknown" in err


def test_a_reference_on_flux_names_a_redux_model(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """On Flux.1, `--reference-model` names a Redux folder in the models folder's redux/;
    an IP-Adapter's name there is refused in one sentence, nothing stored."""
    install_folder(models_dir() / "flux-dev", FLUX_PARTS)  # the CLI never loads weights
    install_folder(models_dir() / "redux" / "FLUX.1-Redux-dev", REDUX_PARTS)
    install_ip_adapter("ip-adapter_sd15")
    style = drawing(tmp_path / "style.png")
    submit = ("submit", "a cat", "--model", "flux-dev", "--size", "64x64", "--negative", "")
    code, out, err = run_cli(
        capsys, *submit, "--reference", str(style), "--reference-model", "FLUX.1-Redux-dev"
    )
    assert (code, err) == (0, "")
    code, out, err = run_cli(
        capsys, *submit, "--reference", str(style), "--reference-model", "ip-adapter_sd15"
    )
    assert code != 0 and out == ""
    assert "reference images on Flux.1 need a Redux model" in err
    assert "'ip-adapter_sd15' is not one of the installed ones" in err


FLUX_PARTS = {
    "_class_name": "FluxPipeline",
    "transformer": ["diffusers", "FluxTransformer2DModel"],
    "vae": ["diffusers", "AutoencoderKL"],
    "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"],
    "text_encoder": ["transformers", "CLIPTextModel"],
    "text_encoder_2": ["transformers", "T5EncoderModel"],
}
REDUX_PARTS = {
    "_class_name": "FluxPriorReduxPipeline",
    "image_encoder": ["transformers", "SiglipVisionModel"],
    "feature_extractor": ["transformers", "SiglipImageProcessor"],
    "image_embedder": ["diffusers", "ReduxImageEncoder"],
}


def install_folder(folder: Path, index: Mapping[str, object]) -> None:
    """A diffusers folder as detection and the listings see it: its index, its parts'
    (empty) configs."""
    for part in index:
        if not part.startswith("_"):
            name = "scheduler_config.json" if part == "scheduler" else "config.json"
            (folder / part).mkdir(parents=True)
            (folder / part / name).write_text("{}")
    (folder / "model_index.json").write_text(json.dumps(index))


def install_flux_controlnet(name: str, *, union: bool = False) -> Path:
    """A Flux.1 ControlNet folder as the listing sees it: its config's class (and a Union's
    `num_mode`)."""
    folder = models_dir() / "controlnet" / name
    folder.mkdir(parents=True)
    config: dict[str, object] = {"_class_name": "FluxControlNetModel", "num_mode": None}
    if union:
        config["num_mode"] = 10
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_a_flux_job_takes_flux_controlnets_and_refuses_an_sd_one(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`--control` on Flux.1 names a Flux ControlNet (a Union's type from its own table);
    an SD ControlNet, or a type the Union lacks, is refused in one sentence, nothing stored."""
    from app.engine.jobs.params import decode_control

    install_folder(models_dir() / "flux-dev", FLUX_PARTS)  # the CLI never loads weights
    install_flux_controlnet("flux-union", union=True)
    install_controlnet("edges-sd15")
    picture = drawing(tmp_path / "in.png")
    submit = ("submit", "a cat", "--model", "flux-dev", "--size", "64x64", "--negative", "")
    control = ("--control", f"none:{picture}:0.8:0:0.6", "--control-model")
    code, out, err = run_cli(capsys, *submit, *control, "flux-union", "--control-type", "blur")
    assert (code, err) == (0, "")
    queue = open_queue()
    job = queue.get(int(out.strip()))
    queue.db.dispose()
    layer = decode_control(job.control)[0]
    assert (layer.model, layer.control_type, layer.weight, layer.end) == (
        "flux-union", "blur", 0.8, 0.6,
    )  # fmt: skip
    refusals = {
        "edges-sd15": "ControlNet 'edges-sd15' is for SD 1.x, but model 'flux-dev' is Flux.1",
        "flux-union": "control type 'segment' is not one that ControlNet Union 'flux-union' takes",
    }
    for net, sentence in refusals.items():
        code, out, err = run_cli(capsys, *submit, *control, net, "--control-type", "segment")
        assert code != 0 and out == ""
        assert sentence in err and len(err.strip().splitlines()) == 1
    assert len(run_cli(capsys, "jobs")[1].strip().splitlines()) == 1  # the first job alone
