"""A tiny UMT5 tokenizer as ComfyUI's files carry it: a SentencePiece unigram model trained
here on a few sentences (with T5's <pad> 0, </s> 1, <unk> 2 and its NFKC normalisation, as
umt5.256000 has), the reference tokenizer transformers builds from it, and a UMT5 text
encoder file with the model's bytes in a uint8 `spiece_model` tensor (ComfyUI's layout).
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import torch

# google/umt5-xxl's tokenizer_config.json, as the reference is loaded (written out here, not
# imported from the app: a change of Easel's settings must show).
UMT5_TOKENIZER_CONFIG = {
    "tokenizer_class": "T5Tokenizer",
    "eos_token": "</s>",
    "pad_token": "<pad>",
    "unk_token": "<unk>",
    "extra_ids": 300,
}
_SENTENCES = (
    "a cat sits on the mat by the window",
    "the quick brown fox jumps over the lazy dog",
    "un chat noir dort près de la fenêtre, à côté du café",
    "猫が窓のそばで寝ている。夕焼けの光",
    "Ünïcödé straße façade naïve — “quoted” text",
    "cinematic shot of a red car driving through rain at night, 4k, film grain",
)


def train_tiny_spiece() -> bytes:
    """A SentencePiece unigram model of a few dozen pieces (deterministic: one thread)."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(_SENTENCES * 8),
        model_writer=model,
        vocab_size=80,
        hard_vocab_limit=False,
        model_type="unigram",
        pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
        character_coverage=1.0,
        normalization_rule_name="nmt_nfkc",
        num_threads=1,
        minloglevel=2,
    )  # fmt: skip
    return model.getvalue()


def write_tokenizer_folder(spiece: bytes, folder: Path) -> Path:
    """google/umt5-xxl's tokenizer files (its SentencePiece model and settings) for `spiece`."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "spiece.model").write_bytes(spiece)
    (folder / "tokenizer_config.json").write_text(json.dumps(UMT5_TOKENIZER_CONFIG))
    return folder


def reference_tokenizer(spiece: bytes, folder: Path) -> Any:
    """What `AutoTokenizer.from_pretrained` gives for a google/umt5-xxl folder of `spiece`."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(write_tokenizer_folder(spiece, folder))


def spiece_tensor(spiece: bytes) -> torch.Tensor:
    """The model's bytes as ComfyUI stores them (`torch.frombuffer` of the serialized proto)."""
    return torch.frombuffer(bytearray(spiece), dtype=torch.uint8).clone()
