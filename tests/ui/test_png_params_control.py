"""Control layers in a PNG's text: written as A1111's ControlNet extension writes them, and
read back (from ours, from the extension's own, from Easel's JSON) where the ControlNet is
installed; the control image itself is not in a PNG, so a layer comes back without it."""

from __future__ import annotations

from pathlib import Path

from PIL import Image

from app.engine.jobs.params import (
    ControlLayer,
    GenerationParams,
    ReferenceImage,
    encode_control,
    encode_reference,
)
from app.engine.outputs.image import a1111_parameters, write_png
from app.ui.presenters.png_params import parse_a1111, read_png_params, with_controlnets

EDGES = "upload:" + "1" * 64
POSE = "upload:" + "2" * 64


def controlled() -> GenerationParams:
    layers = [
        ControlLayer(EDGES, "control_sd15_canny", "canny", 1.0, 0.0, 1.0),
        ControlLayer(POSE, "my-pose", "none", 0.55, 0.2, 0.75),
    ]
    return GenerationParams("a dancer", seed=7, control=encode_control(layers))


def test_layers_are_written_as_the_a1111_extension_writes_them() -> None:
    text = a1111_parameters(controlled())
    assert text.endswith(
        ', ControlNet 0: "Module: canny, Model: control_sd15_canny, Weight: 1.0, '
        'Guidance Start: 0.0, Guidance End: 1.0", ControlNet 1: "Module: none, Model: my-pose, '
        'Weight: 0.55, Guidance Start: 0.2, Guidance End: 0.75"'
    )
    assert "ControlNet" not in a1111_parameters(GenerationParams("a dancer"))
    style = encode_reference([ReferenceImage(EDGES, "ip-adapter_sd15", 0.6)])
    assert a1111_parameters(GenerationParams("a dancer", reference=style)).endswith(
        ', IP-Adapter 0: "Model: ip-adapter_sd15, Weight: 0.6"'
    )
    two = encode_reference(
        [ReferenceImage(EDGES, "ip-adapter_sd15", 0.6), ReferenceImage(POSE, "ip-plus", 0.3)]
    )
    assert a1111_parameters(GenerationParams("a dancer", reference=two)).endswith(
        ', IP-Adapter 0: "Model: ip-adapter_sd15, Weight: 0.6"'
        ', IP-Adapter 1: "Model: ip-plus, Weight: 0.3"'
    )


def test_a_dropped_png_gives_back_its_layers_where_the_controlnet_is_installed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "made.png"
    write_png(Image.new("RGB", (8, 8)), path, controlled())
    parsed = read_png_params(path, controlnets=["my-pose"])
    assert parsed.params.prompt == "a dancer" and parsed.params.control == ""
    assert parsed.control == (ControlLayer("", "my-pose", "none", 0.55, 0.2, 0.75),)
    assert any("'control_sd15_canny' is not installed" in w for w in parsed.warnings)
    both = read_png_params(path, controlnets=["my-pose", "control_sd15_canny"])
    assert [layer.model for layer in both.control] == ["control_sd15_canny", "my-pose"]


def test_the_extensions_own_text_is_read_with_its_extra_fields_ignored() -> None:
    text = (
        "a dancer\nNegative prompt: blur\nSteps: 20, Sampler: Euler a, CFG scale: 7, Seed: 1, "
        'Size: 512x512, ControlNet 0: "Module: canny, Model: control_v11p_sd15_canny '
        "[d14c016b], Weight: 0.8, Resize Mode: Crop and Resize, Low Vram: False, Processor "
        "Res: 512, Threshold A: 100, Threshold B: 200, Guidance Start: 0.1, Guidance End: 0.9, "
        'Pixel Perfect: False, Control Mode: Balanced", Version: v1.6.0'
    )
    parsed = with_controlnets(parse_a1111(text), ["control_v11p_sd15_canny"])
    assert parsed.control == (ControlLayer("", "control_v11p_sd15_canny", "canny", 0.8, 0.1, 0.9),)
    assert parsed.params.seed == 1 and parsed.params.control == ""


def test_a_reference_image_is_not_restored_from_a_png_and_says_so(tmp_path: Path) -> None:
    path = tmp_path / "styled.png"
    style = encode_reference([ReferenceImage(EDGES, "ip-adapter_sd15", 0.6)])
    write_png(Image.new("RGB", (8, 8)), path, GenerationParams("a dancer", reference=style))
    parsed = read_png_params(path, controlnets=[])
    assert parsed.params.reference == "" and parsed.params.prompt == "a dancer"
    assert "the reference image is not restored" in parsed.warnings
