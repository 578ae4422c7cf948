"""AUTOMATIC1111's prompt syntax: attention weights, BREAK and prompts longer than 77 tokens.

- `(word)` multiplies the attention on `word` by 1.1, `((word))` by 1.21, `[word]` divides
  by 1.1, `(word:1.3)` sets 1.3 (nested brackets multiply); `\\(` is a literal bracket.
- `BREAK` starts a new 75-token chunk; a longer prompt is cut into chunks of 75 tokens
  (moving back to a comma within the last 20 tokens, as A1111 does), each encoded on its
  own as BOS + 75 tokens + EOS, and the hidden states are concatenated (77 x chunks).
- Each chunk's hidden states are scaled per token by its weight, then rescaled so their
  mean is unchanged ("Original" emphasis in A1111).

A prompt without any of this goes through the stock `encode_prompt`, so plain prompts stay
bit-identical to the stock diffusers pipelines. An own small parser rather than compel:
compel's `(word)1.1`/`word++` syntax differs from A1111's, and its A1111-compatible mode
does not chunk with the comma backtrack; what artists paste from A1111 must mean the same.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

CHUNK_TOKENS = 75  # 77 minus BOS and EOS
ROUND, SQUARE = 1.1, 1 / 1.1
COMMA_BACKTRACK = 20
BREAK = "BREAK"

_PIECES = re.compile(
    r"\\[()\[\]\\]"  # an escaped bracket or backslash: literal text
    r"|:\s*([+-]?[.\d]+)\s*\)"  # ":1.3)" closes a weighted group
    r"|[()\[\]]"  # a bracket
    r"|[^\\()\[\]:]+|[\\:]"  # plain text (a lone ':' or '\' is text too)
)
_BREAK = re.compile(r"\s*\bBREAK\b\s*")


@dataclass
class _Fragment:
    text: str
    weight: float
    is_break: bool = False


def parse_attention(prompt: str) -> list[tuple[str, float]]:
    """[(text, weight), ...] with neighbours of equal weight merged; ("BREAK", -1) marks
    a BREAK. Unclosed brackets apply to the end of the prompt, as in A1111."""
    fragments: list[_Fragment] = []
    open_round: list[int] = []
    open_square: list[int] = []

    def scale_from(start: int, factor: float) -> None:
        for fragment in fragments[start:]:
            if not fragment.is_break:
                fragment.weight *= factor

    for match in _PIECES.finditer(prompt):
        piece, weight = match.group(0), match.group(1)
        if piece.startswith("\\") and len(piece) == 2:
            fragments.append(_Fragment(piece[1], 1.0))
        elif piece == "(":
            open_round.append(len(fragments))
        elif piece == "[":
            open_square.append(len(fragments))
        elif weight is not None and open_round:
            scale_from(open_round.pop(), float(weight))
        elif piece == ")" and open_round:
            scale_from(open_round.pop(), ROUND)
        elif piece == "]" and open_square:
            scale_from(open_square.pop(), SQUARE)
        else:
            fragments.extend(_split_breaks(piece))
    for start in open_round:
        scale_from(start, ROUND)
    for start in open_square:
        scale_from(start, SQUARE)
    return _merged(fragments)


def _split_breaks(text: str) -> list[_Fragment]:
    parts = _BREAK.split(text)
    out = [_Fragment(parts[0], 1.0)]
    for part in parts[1:]:
        out += [_Fragment(BREAK, -1.0, is_break=True), _Fragment(part, 1.0)]
    return out


def _merged(fragments: list[_Fragment]) -> list[tuple[str, float]]:
    merged: list[_Fragment] = []
    for fragment in fragments:
        last = merged[-1] if merged else None
        if last and not last.is_break and not fragment.is_break and last.weight == fragment.weight:
            last.text += fragment.text
        else:
            merged.append(_Fragment(fragment.text, fragment.weight, fragment.is_break))
    if not merged:
        return [("", 1.0)]
    return [(f.text, f.weight) for f in merged]


def needs_a1111_encoding(prompt: str, tokenizer: Any) -> bool:
    """True when the stock encoder would mean something else: weights, BREAK, > 75 tokens."""
    parsed = parse_attention(prompt)
    if len(parsed) > 1 or parsed[0][1] != 1.0 or parsed[0][0] != prompt:
        return True
    return len(tokenizer(prompt, add_special_tokens=False).input_ids) > CHUNK_TOKENS


@dataclass
class Chunk:
    tokens: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


def chunks_for(prompt: str, tokenizer: Any) -> list[Chunk]:
    """The prompt as A1111 feeds it to CLIP: chunks of BOS + 75 tokens + EOS with weights."""
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    comma = tokenizer(",", add_special_tokens=False).input_ids[0]
    done: list[Chunk] = []
    current = Chunk()
    last_comma = -1

    def close() -> None:
        nonlocal current, last_comma
        missing = CHUNK_TOKENS - len(current.tokens)
        current.tokens = [bos, *current.tokens, *[pad] * missing, eos]
        current.weights = [1.0, *current.weights, *[1.0] * missing, 1.0]
        done.append(current)
        current, last_comma = Chunk(), -1

    for text, weight in parse_attention(prompt):
        if weight == -1.0 and text == BREAK:
            close()
            continue
        for token in tokenizer(text, add_special_tokens=False).input_ids:
            if token == comma:
                last_comma = len(current.tokens)
            elif (
                len(current.tokens) == CHUNK_TOKENS
                and last_comma != -1
                and len(current.tokens) - last_comma <= COMMA_BACKTRACK
            ):
                # Move the words after the last comma to the next chunk, as A1111 does.
                cut = last_comma + 1
                moved = Chunk(current.tokens[cut:], current.weights[cut:])
                current.tokens, current.weights = current.tokens[:cut], current.weights[:cut]
                close()
                current = moved
            if len(current.tokens) == CHUNK_TOKENS:
                close()
            current.tokens.append(token)
            current.weights.append(weight)
    if current.tokens or not done:
        close()
    return done


@dataclass(frozen=True)
class ClipEncoders:
    """The CLIP text encoders a model family conditions on, and how (its `clip_encoders`)."""

    pairs: tuple[tuple[Any, Any], ...]  # (tokenizer, text encoder), in the family's order
    device: Any  # where the embeddings go (the pipeline's execution device)
    dtype: Any  # and in which dtype (the first text encoder's)
    # SDXL's way: each encoder's last hidden layer but one, and the last encoder's pooled
    # output (of the first chunk, as A1111); otherwise each encoder's last hidden layer.
    penultimate_and_pooled: bool = False
    zeros_for_empty_negative: bool = False  # SDXL's force_zeros_for_empty_prompt


def encode_weighted(
    encoders: ClipEncoders, prompt: str, negative: str, do_cfg: bool
) -> tuple[Any, ...]:
    """(cond, uncond, pooled, uncond_pooled) like `encode_prompt` (pooled None unless the
    encoders pool); uncond is None without CFG. Both sides get the same number of chunks."""
    import torch

    pooling = encoders.penultimate_and_pooled
    sides = [prompt, negative] if do_cfg else [prompt]
    per_side: list[list[Any]] = [[] for _ in sides]
    pooled: list[Any] = [None for _ in sides]
    for tokenizer, encoder in encoders.pairs:
        chunk_lists = [chunks_for(text, tokenizer) for text in sides]
        longest = max(len(chunks) for chunks in chunk_lists)
        for index, chunks in enumerate(chunk_lists):
            chunks += chunks_for("", tokenizer) * (longest - len(chunks))
            hidden, first_pooled = _encode_chunks(encoder, chunks, pooling)
            per_side[index].append(hidden)
            pooled[index] = first_pooled  # the last encoder's counts (SDXL's second)
    embeds = [torch.cat(parts, dim=-1) for parts in per_side]
    if do_cfg and encoders.zeros_for_empty_negative and not negative:
        embeds[1], pooled[1] = torch.zeros_like(embeds[1]), torch.zeros_like(pooled[0])
    device, dtype = encoders.device, encoders.dtype
    out = [e.to(device=device, dtype=dtype) for e in embeds]
    pools = [None if p is None else p.to(device=device, dtype=dtype) for p in pooled]
    uncond = out[1] if do_cfg else None
    uncond_pooled = pools[1] if do_cfg else None
    return out[0], uncond, pools[0] if pooling else None, uncond_pooled if pooling else None


def _encode_chunks(encoder: Any, chunks: list[Chunk], pooling: bool) -> tuple[Any, Any]:
    import torch

    hidden_states, pooled = [], None
    for chunk in chunks:
        ids = torch.tensor([chunk.tokens], device=encoder.device)
        if pooling:  # SDXL conditions on the penultimate layer of both encoders
            output = encoder(ids, output_hidden_states=True)
            z = output.hidden_states[-2]
            pooled = output[0] if pooled is None else pooled  # the first chunk's, as A1111
        else:
            z = encoder(ids)[0]
        hidden_states.append(apply_weights(z, chunk.weights))
    return torch.cat(hidden_states, dim=1), pooled


def apply_weights(z: Any, weights: list[float]) -> Any:
    """Scale each token's hidden state by its weight, keeping the chunk's mean.

    An unweighted chunk is returned as it is: A1111's x * (m / m) is the same, except when
    the mean is exactly 0 (an encoder whose final layer norm has no bias), where it is NaN.
    """
    import torch

    if all(weight == 1.0 for weight in weights):
        return z
    multipliers = torch.tensor(weights, dtype=z.dtype, device=z.device)
    original_mean = z.mean()
    z = z * multipliers.reshape(1, -1, 1).expand(z.shape)
    new_mean = z.mean()
    if new_mean == 0:
        return z  # nothing to rescale by; dividing would poison the whole prompt with NaN
    return z * (original_mean / new_mean)
