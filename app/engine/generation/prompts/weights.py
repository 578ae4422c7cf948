"""AUTOMATIC1111's prompt syntax encoded: attention weights, BREAK, prompts longer than a chunk.

- The prompt is parsed into (text, weight) pieces as A1111 parses it (`prompts.syntax`).
- `BREAK` starts a new chunk; a longer prompt is cut into chunks of the text encoder's
  length minus BOS and EOS (75 tokens for CLIP's 77 positions; a tiny test model has
  fewer), moving back to a comma within the last 20 tokens as A1111 does; each chunk is
  encoded on its own as BOS + tokens + EOS, and the hidden states are concatenated.
- Each chunk's hidden states are scaled per token by its weight, then rescaled so their
  mean is unchanged ("Original" emphasis in A1111).

A prompt without any of this goes through the stock `encode_prompt`, so plain prompts stay
bit-identical to the stock diffusers pipelines. An own small parser rather than compel:
compel's `(word)1.1`/`word++` syntax differs from A1111's, and its A1111-compatible mode
does not chunk with the comma backtrack; what artists paste from A1111 must mean the same.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.engine.generation.prompts.syntax import is_break, parse_attention

CHUNK_TOKENS = 75  # CLIP's 77 positions minus BOS and EOS: every released SD model's
COMMA_BACKTRACK = 20
# A tokenizer that was given no length says VERY_LARGE_INTEGER (1e30); no encoder has that.
_MOST_POSITIONS = 1_000_000


def chunk_length(tokenizer: Any, text_encoder: Any = None) -> int:
    """Tokens per chunk: the positions the tokenizer and its text encoder really have,
    less BOS and EOS (75 for CLIP; a chunk longer than the encoder's positions fails)."""
    positions = [getattr(tokenizer, "model_max_length", None)]
    if text_encoder is not None:
        positions.append(getattr(text_encoder.config, "max_position_embeddings", None))
    known = [p for p in positions if isinstance(p, int) and 2 < p < _MOST_POSITIONS]
    return min(known, default=CHUNK_TOKENS + 2) - 2


def needs_a1111_encoding(prompt: str, tokenizer: Any) -> bool:
    """True when the stock encoder would mean something else: weights, BREAK, a dropped
    backslash, more tokens than one chunk holds."""
    parsed = parse_attention(prompt)
    if len(parsed) > 1 or parsed[0][1] != 1.0 or parsed[0][0] != prompt:
        return True
    tokens = len(tokenizer(prompt, add_special_tokens=False).input_ids)
    return tokens > chunk_length(tokenizer)


@dataclass
class Chunk:
    tokens: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)


def chunks_for(prompt: str, tokenizer: Any, length: int | None = None) -> list[Chunk]:
    """The prompt as A1111 feeds it to CLIP: chunks of BOS + `length` tokens + EOS with
    weights (`length`: the tokenizer's own, see `chunk_length`; 75 for CLIP)."""
    length = chunk_length(tokenizer) if length is None else length
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos
    comma = tokenizer(",", add_special_tokens=False).input_ids[0]
    done: list[Chunk] = []
    current = Chunk()
    last_comma = -1

    def close() -> None:
        nonlocal current, last_comma
        missing = length - len(current.tokens)
        current.tokens = [bos, *current.tokens, *[pad] * missing, eos]
        current.weights = [1.0, *current.weights, *[1.0] * missing, 1.0]
        done.append(current)
        current, last_comma = Chunk(), -1

    for text, weight in parse_attention(prompt):
        if is_break(text, weight):
            close()
            continue
        for token in tokenizer(text, add_special_tokens=False).input_ids:
            if token == comma:
                last_comma = len(current.tokens)
            elif (
                len(current.tokens) == length
                and last_comma != -1
                and len(current.tokens) - last_comma <= COMMA_BACKTRACK
            ):
                # Move the words after the last comma to the next chunk, as A1111 does.
                cut = last_comma + 1
                moved = Chunk(current.tokens[cut:], current.weights[cut:])
                current.tokens, current.weights = current.tokens[:cut], current.weights[:cut]
                close()
                current = moved
            if len(current.tokens) == length:
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
    # SD 3.x's way: every encoder's pooled output side by side (CLIP-L's, then CLIP-G's).
    pool_every_encoder: bool = False


def encode_weighted(
    encoders: ClipEncoders, prompt: str, negative: str, do_cfg: bool
) -> tuple[Any, ...]:
    """(cond, uncond, pooled, uncond_pooled) like `encode_prompt` (pooled None unless the
    encoders pool); uncond is None without CFG. Both sides get the same number of chunks."""
    import torch

    pooling = encoders.penultimate_and_pooled
    sides = [prompt, negative] if do_cfg else [prompt]
    per_side: list[list[Any]] = [[] for _ in sides]
    pooled_per_side: list[list[Any]] = [[] for _ in sides]
    # One length for every encoder: their hidden states are joined token by token.
    length = min(chunk_length(tokenizer, encoder) for tokenizer, encoder in encoders.pairs)
    for tokenizer, encoder in encoders.pairs:
        chunk_lists = [chunks_for(text, tokenizer, length) for text in sides]
        longest = max(len(chunks) for chunks in chunk_lists)
        for index, chunks in enumerate(chunk_lists):
            chunks += chunks_for("", tokenizer, length) * (longest - len(chunks))
            hidden, first_pooled = _encode_chunks(encoder, chunks, pooling)
            per_side[index].append(hidden)
            pooled_per_side[index].append(first_pooled)
    embeds = [torch.cat(parts, dim=-1) for parts in per_side]
    # The last encoder's pooled output (SDXL's second), or all of them (SD 3.x).
    pooled: list[Any] = [
        torch.cat(parts, dim=-1) if encoders.pool_every_encoder else parts[-1]
        for parts in pooled_per_side
    ]
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


def plain_text(prompt: str) -> str:
    """The prompt's words without A1111's syntax: brackets and weights dropped, a BREAK a
    space. What a T5 encoder (SD 3.x, Flux) is given: T5 reads sentences, not chunks of 75
    tokens, and A1111's per-token weighting was made for CLIP."""
    pieces = [" " if is_break(text, weight) else text for text, weight in parse_attention(prompt)]
    return " ".join("".join(pieces).split())
