"""A1111 prompt syntax: the parser, the chunking and the weighted embeddings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import CLIPTextModel, CLIPTokenizer

from app.engine.generation.families import family_of
from app.engine.generation.families.unet import UNetFamily
from app.engine.generation.files.architecture import Architecture
from app.engine.generation.prompts.syntax import UnreadableWeight, parse_attention
from app.engine.generation.prompts.weights import (
    CHUNK_TOKENS,
    ClipEncoders,
    apply_weights,
    chunk_length,
    chunks_for,
    encode_weighted,
    needs_a1111_encoding,
)
from app.engine.jobs.params import DEFAULT_MODEL
from app.engine.paths import bundled_models_dir
from app.testing.tiny.unet import UNET_ARCHITECTURES
from tests.engine.generation import a1111_reference
from tests.engine.generation.tiny_architectures import (
    PAUSE_AT,
    generate,
    go_on,
    max_diff,
    model_info,
    params_for,
    pause_at,
    pixels,
    runner_for,
    tiny_folders,
)

__all__ = ["tiny_folders"]

pytestmark = pytest.mark.filterwarnings("ignore:__array__ implementation:DeprecationWarning")


@pytest.mark.parametrize(
    ("prompt", "expected"),
    [
        ("a cat", [("a cat", 1.0)]),
        ("(cat)", [("cat", 1.1)]),
        ("((cat))", [("cat", pytest.approx(1.21))]),
        ("[cat]", [("cat", pytest.approx(1 / 1.1))]),
        ("(cat:1.5) dog", [("cat", 1.5), (" dog", 1.0)]),
        ("(a (b:2))", [("a ", pytest.approx(1.1)), ("b", pytest.approx(2.2))]),
        (r"\(literal\) x", [("(literal) x", 1.0)]),
        ("a BREAK b", [("a", 1.0), ("BREAK", -1.0), ("b", 1.0)]),
        ("(unclosed", [("unclosed", pytest.approx(1.1))]),
        ("time: 5", [("time: 5", 1.0)]),
        ("", [("", 1.0)]),
        # A1111 allows spaces around the number (its pattern is `:\s*([+-]?[.\d]+)\s*\)`).
        ("(word: 1.2)", [("word", 1.2)]),
        ("(word : 1.2 )", [("word ", 1.2)]),
        (r"a\b \\ c", [("ab \\ c", 1.0)]),  # a backslash that escapes nothing is dropped
        # A BREAK inside brackets is multiplied with them, and so is no BREAK any more.
        ("(a BREAK b)", [("a", 1.1), ("BREAK", -1.1), ("b", 1.1)]),
    ],
)
def test_the_parser_follows_a1111(prompt: str, expected: list[tuple[str, Any]]) -> None:
    assert parse_attention(prompt) == expected


# What A1111's syntax is made of, and what it must not trip over: brackets, escapes, weights
# with and without spaces (and numbers that are none), colons, BREAK, Unicode digits and
# spaces (A1111's `\d` and `\s` match them too), other scripts.
A1111_PIECES = st.sampled_from([
    "(", ")", "[", "]", "\\", "\\(", "\\)", "\\[", "\\]", "\\\\", ":", ": ", " ", "\t", "\n",
    "\u00a0", "BREAK", " BREAK ", "BREAKfast", "a", "red cat", "é", "猫", "1.2", ".", "+", "-",
    "\u0663", ":1.5)", ": 1.5 )", ":-1)", ":0)", ":1.2.3)", ":.)", "x\\y",
])  # fmt: skip
PROMPTS = (
    st.lists(A1111_PIECES, max_size=16).map("".join)
    | st.text(alphabet="()[]\\: .1BREAKa\u00a0", max_size=24)
    | st.text(max_size=24)
)


@settings(max_examples=3000, deadline=None)
@given(PROMPTS)
def test_the_parser_gives_what_a1111_gives_on_generated_prompts(prompt: str) -> None:
    try:
        expected = [
            (text, weight) for text, weight in a1111_reference.parse_prompt_attention(prompt)
        ]
    except ValueError:  # A1111 fails the generation on a weight that is no number
        with pytest.raises(UnreadableWeight, match="is not a number"):
            parse_attention(prompt)
        return
    assert parse_attention(prompt) == expected  # exactly: the same products in the same order


def test_the_reference_agrees_with_the_examples_upstream_documents() -> None:
    # The doctests of `parse_prompt_attention` upstream: the oracle must pass them too.
    parse = a1111_reference.parse_prompt_attention
    assert parse("an (important) word") == [["an ", 1.0], ["important", 1.1], [" word", 1.0]]
    assert parse("(unbalanced") == [["unbalanced", 1.1]]
    assert parse("\\(literal\\]") == [["(literal]", 1.0]]
    assert parse("(unnecessary)(parens)") == [["unnecessaryparens", 1.1]]
    assert parse("a (((house:1.3)) [on] a (hill:0.5), sun, (((sky))).") == [
        ["a ", 1.0], ["house", 1.5730000000000004], [" ", 1.1], ["on", 1.0], [" a ", 1.1],
        ["hill", 0.55], [", sun, ", 1.1], ["sky", 1.4641000000000006], [".", 1.1],
    ]  # fmt: skip


@pytest.fixture(scope="module")
def pipes(tiny_folders: dict[Architecture, Path]) -> dict[Architecture, Any]:
    return {
        arch: runner_for(model_info(folder, "m")).load("m").pipe
        for arch, folder in tiny_folders.items()
    }


def clip_encoders(pipe: Any) -> ClipEncoders:
    """The text encoders as the pipeline's model family hands them to `encode_weighted`."""
    family = family_of(pipe)
    assert isinstance(family, UNetFamily)
    return family.clip_encoders()


def reference_embedding(pipe: Any, pieces: list[tuple[str, float]]) -> torch.Tensor:
    """Written out by hand: BOS + tokens + padding + EOS, per-token scale, mean restored."""
    tokenizer = pipe.tokenizer
    ids, weights = [tokenizer.bos_token_id], [1.0]
    for text, weight in pieces:
        tokens = tokenizer(text, add_special_tokens=False).input_ids
        ids += tokens
        weights += [weight] * len(tokens)
    padding = 76 - len(ids)
    ids += [tokenizer.pad_token_id] * padding + [tokenizer.eos_token_id]
    weights += [1.0] * (padding + 1)
    with torch.no_grad():
        z = pipe.text_encoder(torch.tensor([ids]))[0]
    scaled = z * torch.tensor(weights)[None, :, None]
    return scaled * (z.mean() / scaled.mean())


def test_a_weighted_prompt_equals_the_reference_embedding(pipes: dict[Architecture, Any]) -> None:
    pipe = pipes[Architecture.SD1]
    with torch.no_grad():
        cond, uncond, pooled, _ = encode_weighted(
            clip_encoders(pipe), "a (cat:1.5) [sky]", "dog", True
        )
    expected = reference_embedding(pipe, [("a ", 1.0), ("cat", 1.5), (" ", 1.0), ("sky", 1 / 1.1)])
    assert torch.equal(cond, expected)
    assert torch.equal(uncond, reference_embedding(pipe, [("dog", 1.0)]))
    assert pooled is None
    assert not torch.equal(cond, reference_embedding(pipe, [("a cat sky", 1.0)]))


@pytest.mark.parametrize("arch", UNET_ARCHITECTURES, ids=lambda a: a.value)
def test_weight_one_through_the_a1111_path_equals_the_stock_encoder(
    pipes: dict[Architecture, Any], arch: Architecture
) -> None:
    pipe = pipes[arch]
    with torch.no_grad():
        ours = encode_weighted(clip_encoders(pipe), "(the cat:1)", "(a dog:1)", True)
        kwargs = {"prompt": "the cat", "negative_prompt": "a dog", "device": torch.device("cpu")}
        stock = pipe.encode_prompt(
            num_images_per_prompt=1, do_classifier_free_guidance=True, **kwargs
        )
    assert len(ours) == 4
    for mine, theirs in zip(ours, stock, strict=False):
        if mine is not None:
            assert torch.equal(mine, theirs)


def test_long_prompts_and_break_make_chunks_of_77(pipes: dict[Architecture, Any]) -> None:
    pipe = pipes[Architecture.SD1]
    tokenizer = pipe.tokenizer
    long_prompt = "cat " * 100
    assert needs_a1111_encoding(long_prompt, tokenizer)
    assert not needs_a1111_encoding("the cat", tokenizer)
    chunks = chunks_for(long_prompt, tokenizer)
    assert [len(c.tokens) for c in chunks] == [77, 77]
    assert chunks[1].tokens[1:26] == [tokenizer("cat", add_special_tokens=False).input_ids[0]] * 25
    assert len(chunks_for("a BREAK b", tokenizer)) == 2
    # A comma near the end of a full chunk moves the words after it to the next chunk.
    words = "a " * 70 + ", " + "b " * 10
    first, second = chunks_for(words, tokenizer)
    comma = tokenizer(",", add_special_tokens=False).input_ids[0]
    assert first.tokens[71] == comma and second.tokens[1] == tokenizer("b").input_ids[1]
    with torch.no_grad():
        cond, uncond, _, _ = encode_weighted(clip_encoders(pipe), long_prompt, "short", True)
    assert cond.shape[1] == uncond.shape[1] == 2 * (CHUNK_TOKENS + 2)


@pytest.mark.parametrize("arch", [Architecture.SD2, Architecture.SDXL], ids=lambda a: a.value)
def test_weighted_prompts_generate_and_resume_exactly(
    tiny_folders: dict[Architecture, Path], tmp_path: Path, arch: Architecture
) -> None:
    runner = runner_for(model_info(tiny_folders[arch], "m"))
    weighted = params_for("m", "DPM++ 2M", prompt="(the cat:1.4) BREAK " + "sky, " * 40)
    reference = generate(runner, weighted, tmp_path, "reference")
    assert max_diff(reference, generate(runner, params_for("m", "DPM++ 2M"), tmp_path, "p")) > 0
    ckpt, out = tmp_path / "job.ckpt", tmp_path / "job.png"
    runner.run(weighted, output_path=out, checkpoint_path=ckpt, on_step=pause_at(PAUSE_AT))
    runner.run(weighted, output_path=out, checkpoint_path=ckpt, on_step=go_on)
    assert max_diff(reference, pixels(out)) == 0


def test_weighting_a_chunk_whose_mean_is_zero_stays_finite() -> None:
    # An untrained final layer norm (no bias) gives hidden states whose mean is exactly 0;
    # A1111's mean-restoring division would turn the whole prompt into NaN.
    z = torch.tensor([[[1.0, -1.0], [2.0, -2.0], [0.5, -0.5]]])
    assert torch.equal(apply_weights(z, [1.0, 1.0, 1.0]), z)
    weighted = apply_weights(z, [1.0, 1.4, 1.0])
    assert torch.isfinite(weighted).all()
    assert torch.allclose(weighted[0, 1], torch.tensor([2.8, -2.8]))


@pytest.fixture(scope="module")
def bundled_encoder() -> tuple[Any, Any]:
    """The bundled model's tokenizer and text encoder: 16 positions, not CLIP's 77."""
    folder = bundled_models_dir() / DEFAULT_MODEL
    tokenizer = CLIPTokenizer.from_pretrained(folder / "tokenizer")
    encoder = CLIPTextModel.from_pretrained(folder / "text_encoder").eval()
    return tokenizer, encoder


def test_chunks_follow_the_bundled_text_encoders_real_length(
    bundled_encoder: tuple[Any, Any],
) -> None:
    tokenizer, encoder = bundled_encoder
    positions = encoder.config.max_position_embeddings
    assert positions == tokenizer.model_max_length == 16
    assert chunk_length(tokenizer, encoder) == positions - 2
    for chunk in chunks_for("a red (circle) BREAK " + "sky, " * 20, tokenizer):
        assert len(chunk.tokens) == positions
    encoders = ClipEncoders(((tokenizer, encoder),), torch.device("cpu"), torch.float32)
    for prompt in ("(red)", "[red]", "a BREAK b", "red " * 40):
        assert needs_a1111_encoding(prompt, tokenizer)
        with torch.no_grad():  # 77-token chunks failed here: max_position_embeddings (16)
            cond, uncond, _, _ = encode_weighted(encoders, prompt, "", True)
        assert cond.shape[1] == uncond.shape[1] and cond.shape[1] % positions == 0
        assert torch.isfinite(cond).all()


def test_a_tokenizer_without_a_length_chunks_as_clip_does() -> None:
    class NoLength:
        model_max_length = int(1e30)  # what transformers says when nobody set one

    assert chunk_length(NoLength()) == CHUNK_TOKENS
