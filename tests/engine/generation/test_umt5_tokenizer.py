"""UMT5's tokenizer for Wan's split files (families/wan/umt5.py): from the SentencePiece
model ComfyUI stores in the text encoder file, from a tokenizer folder beside it, or from a
Hugging Face cache snapshot; token for token what transformers' tokenizer of a
google/umt5-xxl folder gives, as `WanPipeline` calls it (512 tokens, padded, truncated).

On a tiny SentencePiece model trained by the test (tiny_umt5): the real one is 4.5 MB.
"""

from __future__ import annotations

import json
import random
import struct
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import save_file

from app.engine.generation.errors import ModelLoadFailed, UnsupportedModel
from app.engine.generation.families.wan import umt5
from app.engine.generation.files.architecture import Part
from tests.engine.generation.tiny_umt5 import (
    reference_tokenizer,
    spiece_tensor,
    train_tiny_spiece,
    write_tokenizer_folder,
)

PROMPTS = (
    "a cat sits on the mat",
    "Un chat noir près de la fenêtre, à côté du café",
    "猫が窓のそばで寝ている 🐈 ｆｕｌｌｗｉｄｔｈ ①②",  # NFKC folds the full-width letters
    "straße  with   spaces\tand\nnew lines, ẞ ﬁ ligature",
    "",
    "the <extra_id_7> sentinel and </s> inside",
    " ".join(["cinematic shot of a red car driving through rain at night"] * 80),  # > 512
)
WAN_TOKENS = 512  # WanPipeline's max_sequence_length


def wan_tokens(tokenizer: Any, prompt: str) -> tuple[list[int], list[int]]:
    """As `WanPipeline._get_t5_prompt_embeds` calls the tokenizer."""
    out = tokenizer(
        [prompt], padding="max_length", max_length=WAN_TOKENS, truncation=True,
        add_special_tokens=True, return_attention_mask=True, return_tensors="pt",
    )  # fmt: skip
    return out.input_ids[0].tolist(), out.attention_mask[0].tolist()


@pytest.fixture(scope="module")
def spiece() -> bytes:
    return train_tiny_spiece()


def write_umt5_file(path: Path, spiece: bytes | None) -> Path:
    """A (two-tensor) UMT5 file in ComfyUI's layout, with its tokenizer or without."""
    tensors = {"shared.weight": torch.zeros(4, 2), "encoder.final_layer_norm.weight": torch.ones(2)}
    if spiece is not None:
        tensors["spiece_model"] = spiece_tensor(spiece)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path))
    return path


def test_the_tokenizer_comfyui_s_file_carries_tokenizes_as_transformers_does(
    spiece: bytes, tmp_path: Path
) -> None:
    file = write_umt5_file(tmp_path / "text_encoders" / "umt5_xxl_fp16.safetensors", spiece)
    assert umt5.embedded_model(file) == spiece
    source = umt5.tokenizer_source(file, caches=())
    assert source == umt5.TokenizerSource(embedded=file)
    ours = umt5.tokenizers((Part("umt5", file, ""),))["tokenizer"]
    theirs = reference_tokenizer(spiece, tmp_path / "google-umt5-xxl")
    assert len(ours) == len(theirs) == 300 + len(_pieces(spiece))
    for prompt in PROMPTS:
        assert wan_tokens(ours, prompt) == wan_tokens(theirs, prompt), prompt
    ids, mask = wan_tokens(ours, PROMPTS[-1])
    assert sum(mask) == WAN_TOKENS and ids[-1] == 1  # truncated, still ending in </s>
    # A folder of the fast tokenizer's files alone (tokenizer.json, as the hub's Wan
    # repositories have it) loads to the same tokens.
    saved = tmp_path / "saved"
    theirs.save_pretrained(saved)
    (saved / "spiece.model").unlink(missing_ok=True)
    from_json = umt5.tokenizer_from_folder(saved)
    for prompt in PROMPTS:
        assert wan_tokens(from_json, prompt) == wan_tokens(ours, prompt), prompt
    # And as SentencePiece itself reads a plain prompt (ComfyUI's tokenizer): the pieces, </s>.
    import sentencepiece

    plain = sentencepiece.SentencePieceProcessor(model_proto=spiece)
    for prompt in PROMPTS[:3]:
        ids, mask = wan_tokens(ours, prompt)
        expected = [*plain.encode(prompt), 1]
        assert ids[: len(expected)] == expected and sum(mask) == len(expected)


def _pieces(spiece: bytes) -> list[str]:
    import sentencepiece

    model = sentencepiece.SentencePieceProcessor(model_proto=spiece)
    return [model.id_to_piece(i) for i in range(model.get_piece_size())]


def test_a_folder_beside_the_file_comes_first_then_the_file_then_the_hub_cache(
    spiece: bytes, tmp_path: Path
) -> None:
    bare = write_umt5_file(tmp_path / "text_encoders" / "umt5_xxl_fp8_e4m3fn.safetensors", None)
    cache = tmp_path / "hub"
    assert umt5.tokenizer_source(bare, caches=(cache,)) is None
    snapshot = cache / "models--Wan-AI--Wan2.1-T2V-1.3B-Diffusers" / "snapshots" / "abc"
    write_tokenizer_folder(spiece, snapshot / "tokenizer")
    assert umt5.tokenizer_source(bare, caches=(cache,)) == umt5.TokenizerSource(
        folder=snapshot / "tokenizer"
    )
    google = cache / "models--google--umt5-xxl" / "snapshots" / "def"
    write_tokenizer_folder(spiece, google)  # google/umt5-xxl's own repository is looked at first
    assert umt5.tokenizer_source(bare, caches=(cache,)) == umt5.TokenizerSource(folder=google)

    carrying = write_umt5_file(bare.with_name("umt5_xxl_fp16.safetensors"), spiece)
    assert umt5.tokenizer_source(carrying, caches=(cache,)).embedded == carrying  # type: ignore[union-attr]
    beside = write_tokenizer_folder(spiece, bare.parent / "umt5-xxl")
    assert umt5.tokenizer_source(carrying, caches=(cache,)) == umt5.TokenizerSource(folder=beside)
    ours = umt5.tokenizer_from_folder(beside)
    theirs = reference_tokenizer(spiece, tmp_path / "reference")
    assert wan_tokens(ours, PROMPTS[1]) == wan_tokens(theirs, PROMPTS[1])


def test_without_a_tokenizer_anywhere_the_sentence_says_what_and_where(tmp_path: Path) -> None:
    bare = write_umt5_file(tmp_path / "text_encoders" / "umt5_xxl_fp8_e4m3fn.safetensors", None)
    sentence = (
        "umt5_xxl_fp8_e4m3fn.safetensors in text_encoders/ carries no UMT5 tokenizer (ComfyUI's "
        "umt5_xxl_fp16.safetensors does); put google/umt5-xxl's tokenizer files (spiece.model "
        "or tokenizer.json) in text_encoders/umt5-xxl/, or use a text encoder file that "
        "carries one"
    )
    assert umt5.missing_tokenizer(bare) == sentence
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(umt5, "hf_cache_dirs", lambda: (tmp_path / "no-cache",))
        assert umt5.parts_problem({"umt5": Part("umt5", bare, "")}) == sentence
        with pytest.raises(UnsupportedModel, match="carries no UMT5 tokenizer"):
            umt5.tokenizers((Part("umt5", bare, ""),))


def _garbage(_spiece: bytes) -> bytes:
    return bytes(random.Random(0).randrange(256) for _ in range(5000))


def _sparse_huge_umt5_file(path: Path) -> Path:
    """A UMT5 file whose `spiece_model` is 1 byte over the bound: written sparse (the
    bytes are zeros the file system does not store), so the test writes a header only."""
    size = umt5.MAX_EMBEDDED_BYTES + 1
    entry = {"dtype": "U8", "shape": [size], "data_offsets": [0, size]}
    header = json.dumps({umt5.EMBEDDED_KEY: entry}).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        handle.write(struct.pack("<Q", len(header)) + header)
        handle.truncate(8 + len(header) + size)
    return path


DAMAGED = "umt5_xxl_fp16.safetensors in text_encoders/ carries a damaged UMT5 tokenizer (its "
UNDAMAGED = (
    "); use an undamaged copy of the file, or put google/umt5-xxl's tokenizer files "
    "(spiece.model or tokenizer.json) in text_encoders/umt5-xxl/"
)


@pytest.mark.parametrize(
    ("hostile", "what", "at_submit"),
    [
        (_garbage, "spiece_model is not a SentencePiece model", False),
        (lambda spiece: spiece[: len(spiece) // 2], "spiece_model is not a SentencePiece model",
         False),
        (lambda spiece: spiece[:-1], "spiece_model is not a SentencePiece model", False),
        (lambda _spiece: b"", "spiece_model is empty", True),
        (lambda spiece: torch.zeros(3, 2), "spiece_model is not a row of bytes", True),
        (None, "spiece_model is 67,108,865 bytes, more than any SentencePiece model (UMT5's is "
         "4.5 MB)", True),
    ],
    ids=["garbage", "truncated", "last-byte-cut", "empty", "not-bytes", "huge"],
)  # fmt: skip
def test_a_hostile_embedded_tokenizer_is_refused_in_one_sentence_naming_the_file(
    spiece: bytes, tmp_path: Path, hostile: Any, what: str, at_submit: bool
) -> None:
    """Garbage, truncated, empty, mistyped or huge `spiece_model` bytes: refused at submit
    where the header tells (detection), else when the job loads them: never a crash, a
    hang, a page of transformers' advice, or a tokenizer of no pieces (an empty message
    parses to one, which would tokenize every prompt to unknowns)."""
    path = tmp_path / "text_encoders" / "umt5_xxl_fp16.safetensors"
    if hostile is None:
        _sparse_huge_umt5_file(path)
    else:
        made = hostile(spiece)
        if not isinstance(made, torch.Tensor):  # bytes, as ComfyUI stores them
            made = torch.tensor(list(made), dtype=torch.uint8)
        path.parent.mkdir(parents=True)
        save_file({"shared.weight": torch.zeros(4, 2), umt5.EMBEDDED_KEY: made}, str(path))
    sentence = DAMAGED + what + UNDAMAGED
    part = Part("umt5", path, "")
    assert umt5.parts_problem({"umt5": part}) == (sentence if at_submit else "")
    started = time.monotonic()
    with pytest.raises(ModelLoadFailed) as refused:
        umt5.tokenizers((part,))
    assert str(refused.value) == sentence
    assert time.monotonic() - started < 2  # the huge one is never read
