"""A tiny CLIP byte-level BPE tokenizer built offline for the caption vocabulary.

The vocabulary is the full byte-level alphabet (so any prompt still tokenizes,
character by character) plus merges that turn every caption word into a
single token. Word-level tokens make the text encoder's job easy: it only has
to learn what each word means in its position, not how to spell it.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from transformers import CLIPTokenizer

BOS = "<|startoftext|>"
EOS = "<|endoftext|>"
EOW = "</w>"


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2/CLIP byte -> printable unicode character table."""
    bs = list(range(ord("!"), ord("~") + 1))
    bs += list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs, strict=True)}


def _bpe(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
    """Apply BPE exactly like the tokenizers library: always merge the best-ranked pair."""
    while len(symbols) > 1:
        pairs = [(ranks.get(p, 1 << 30), i) for i, p in enumerate(itertools.pairwise(symbols))]
        rank, i = min(pairs)
        if rank == 1 << 30:
            break
        symbols = [*symbols[:i], symbols[i] + symbols[i + 1], *symbols[i + 2 :]]
    return symbols


def build_vocab_and_merges(words: tuple[str, ...]) -> tuple[dict[str, int], list[str]]:
    alphabet = list(bytes_to_unicode().values())
    tokens = alphabet + [c + EOW for c in alphabet]
    merges: list[tuple[str, str]] = []
    ranks: dict[tuple[str, str], int] = {}
    # Grow merges until every word is one token. New merges only get appended
    # (lowest priority), so they never break a word that already works.
    changed = True
    while changed:
        changed = False
        for word in words:
            symbols = _bpe([*list(word[:-1]), word[-1] + EOW], ranks)
            if len(symbols) > 1:
                pair = (symbols[0], symbols[1])
                ranks[pair] = len(merges)
                merges.append(pair)
                tokens.append(pair[0] + pair[1])
                changed = True
    vocab: dict[str, int] = {}
    for tok in [*tokens, BOS, EOS]:
        vocab.setdefault(tok, len(vocab))
    return vocab, [f"{a} {b}" for a, b in merges]


def build_tokenizer(words: tuple[str, ...], workdir: Path, max_length: int = 16) -> CLIPTokenizer:
    """Write vocab.json/merges.txt to ``workdir`` and load them as a CLIPTokenizer."""
    vocab, merges = build_vocab_and_merges(words)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "vocab.json").write_text(json.dumps(vocab), encoding="utf-8")
    (workdir / "merges.txt").write_text(
        "#version: 0.2\n" + "\n".join(merges) + "\n", encoding="utf-8"
    )
    # transformers 5 builds the BPE from in-memory vocab/merges; the files are
    # written only for inspection.
    tokenizer = CLIPTokenizer(
        vocab=vocab,
        merges=[tuple(m.split(" ")) for m in merges],
        model_max_length=max_length,
    )
    for word in words:
        ids = tokenizer(word, add_special_tokens=False).input_ids
        if len(ids) != 1:
            raise RuntimeError(f"word {word!r} did not become a single token: {ids}")
    return tokenizer
