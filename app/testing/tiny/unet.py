"""Tiny, randomly initialised pipelines of each architecture, for tests and benchmarks.

Real components with the real folder layout (what `save_pretrained` writes), but a few
hundred thousand parameters in all, so the whole generation path runs in milliseconds on a
CPU without a trained model and without any download. SD 2.x differs from SD 1.x where the
loaders and the loop look: plain-GELU text encoder, linear attention projections and
v-prediction; SDXL has two text encoders (the second with a projection) and the
"text_time" added conditioning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.engine.generation.files.architecture import Architecture

# The UNet families this module builds tiny pipelines of (the transformer families have a
# module each here).
UNET_ARCHITECTURES = (Architecture.SD1, Architecture.SD2, Architecture.SDXL)

# Single characters plus their end-of-word forms: enough for CLIP's BPE to tokenize any
# lowercase prompt (other characters become the unknown token, <|endoftext|>).
_SPECIAL = ("<|startoftext|>", "<|endoftext|>")
_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789,.!?'-"
TOKENIZER_MERGES = ("t h", "th e</w>", "a n", "an d</w>", "c a", "ca t</w>")


def tokenizer_vocab() -> dict[str, int]:
    tokens = [*_CHARS, *(c + "</w>" for c in _CHARS)]
    tokens += [m.replace(" ", "") for m in TOKENIZER_MERGES]
    tokens += list(_SPECIAL)
    return {token: index for index, token in enumerate(dict.fromkeys(tokens))}


def write_tiny_pipeline(
    dest: Path,
    *,
    seed: int = 0,
    architecture: Architecture = Architecture.SD1,
    inpainting: bool = False,
) -> Path:
    """Save a tiny pipeline of `architecture` (UNet, VAE, text encoder(s), tokenizer(s));
    `inpainting`: with a 9-channel UNet (latents, mask, masked image), as SD inpainting."""
    pipe = build_tiny_pipeline(architecture, seed=seed, inpainting=inpainting)
    dest.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(dest)
    return dest


def build_tiny_pipeline(
    architecture: Architecture, *, seed: int = 0, inpainting: bool = False
) -> Any:
    import torch

    in_channels = 9 if inpainting else 4
    with torch.random.fork_rng():  # seed the weights without disturbing the caller's RNG
        torch.manual_seed(seed)
        if architecture is Architecture.SDXL:
            return _build_sdxl(in_channels)
        return _build_sd(v2=architecture is Architecture.SD2, in_channels=in_channels)


def _text_config(*, v2: bool = False, hidden_size: int = 32, projection_dim: int = 32) -> Any:
    from transformers import CLIPTextConfig

    vocab = tokenizer_vocab()
    return CLIPTextConfig(
        vocab_size=len(vocab),
        hidden_size=hidden_size,
        intermediate_size=37,
        num_attention_heads=4,
        num_hidden_layers=2,
        max_position_embeddings=77,
        projection_dim=projection_dim,
        hidden_act="gelu" if v2 else "quick_gelu",
        bos_token_id=vocab[_SPECIAL[0]],
        eos_token_id=vocab[_SPECIAL[1]],
        pad_token_id=vocab[_SPECIAL[1]],
    )


def _tokenizer() -> Any:
    from transformers import CLIPTokenizer

    merges: Any = [tuple(m.split()) for m in TOKENIZER_MERGES]  # the tokenizers backend wants pairs
    return CLIPTokenizer(vocab=tokenizer_vocab(), merges=merges, model_max_length=77)


def _scheduler(prediction_type: str = "epsilon") -> Any:
    from diffusers import EulerDiscreteScheduler

    return EulerDiscreteScheduler(
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        num_train_timesteps=1000,
        steps_offset=1,
        prediction_type=prediction_type,
    )


def _vae(*, sdxl: bool = False) -> Any:
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(8, 16, 16, 16),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=8,
        layers_per_block=1,
        sample_size=64,
        # SDXL's VAE overflows in float16 and is decoded in float32 (as its real config says).
        scaling_factor=0.13025 if sdxl else 0.18215,
        force_upcast=sdxl,
    )


def tiny_flow_vae(*, scaling_factor: float, shift_factor: float) -> Any:
    """The 16-channel VAE of the flow-matching families (Flux.1, SD 3.x, Z-Image): as the
    UNet families' tiny one, with the family's scaling and shift and no quant convs."""
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=16,
        block_out_channels=(8, 16, 16, 16),
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        norm_num_groups=8,
        layers_per_block=1,
        sample_size=64,
        scaling_factor=scaling_factor,
        shift_factor=shift_factor,
        use_quant_conv=False,
        use_post_quant_conv=False,
    )


def _build_sd(*, v2: bool, in_channels: int = 4) -> Any:
    from diffusers import StableDiffusionPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel

    unet = UNet2DConditionModel(
        sample_size=8,
        in_channels=in_channels,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        cross_attention_dim=32,
        attention_head_dim=4,
        use_linear_projection=v2,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
    )
    return StableDiffusionPipeline(
        vae=_vae(),
        text_encoder=CLIPTextModel(_text_config(v2=v2)),
        tokenizer=_tokenizer(),
        unet=unet,
        scheduler=_scheduler("v_prediction" if v2 else "epsilon"),
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )


def _build_sdxl(in_channels: int = 4) -> Any:
    from diffusers import StableDiffusionXLPipeline, UNet2DConditionModel
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    time_embed_dim, projection_dim = 8, 32
    unet = UNet2DConditionModel(
        sample_size=8,
        in_channels=in_channels,
        out_channels=4,
        layers_per_block=1,
        block_out_channels=(16, 32),
        norm_num_groups=8,
        # Both encoders' hidden states side by side (32 + 48). The widths differ as in the real
        # model (768 and 1280): diffusers' single-file loader tells the encoders apart by it.
        cross_attention_dim=80,
        attention_head_dim=(2, 4),
        use_linear_projection=True,
        transformer_layers_per_block=(1, 2),
        addition_embed_type="text_time",
        addition_time_embed_dim=time_embed_dim,
        # 6 size/crop numbers, each embedded, plus the second encoder's pooled projection.
        projection_class_embeddings_input_dim=6 * time_embed_dim + projection_dim,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
    )
    return StableDiffusionXLPipeline(
        vae=_vae(sdxl=True),
        text_encoder=CLIPTextModel(_text_config()),
        text_encoder_2=CLIPTextModelWithProjection(
            _text_config(v2=True, hidden_size=48, projection_dim=projection_dim)
        ),
        tokenizer=_tokenizer(),
        tokenizer_2=_tokenizer(),
        unet=unet,
        scheduler=_scheduler(),
        add_watermarker=False,
    )


def write_tiny_single_file(
    dest: Path,
    *,
    seed: int = 0,
    architecture: Architecture = Architecture.SD1,
    inpainting: bool = False,
) -> Path:
    """The same tiny pipeline as `write_tiny_pipeline` (same seed, same weights), saved as
    one `.safetensors` checkpoint with the original LDM key names, as artists get them."""
    from safetensors.torch import save_file

    from app.testing.tiny.original_layout import pipeline_to_original

    pipe = build_tiny_pipeline(architecture, seed=seed, inpainting=inpainting)
    dest.parent.mkdir(parents=True, exist_ok=True)
    save_file(pipeline_to_original(pipe), str(dest))
    return dest


def write_tiny_lora(
    dest: Path, *, seed: int = 1, architecture: Architecture = Architecture.SD1
) -> Path:
    """A random LoRA (rank 4, UNet attention and text encoder(s)) for the tiny pipeline of
    `architecture`, saved in diffusers' LoRA format as `dest` (a .safetensors file)."""
    import torch
    from peft import LoraConfig, inject_adapter_in_model
    from peft.utils import get_peft_model_state_dict

    pipe = build_tiny_pipeline(architecture)
    unet_targets = ["to_q", "to_k", "to_v", "to_out.0"]
    text_targets = ["q_proj", "k_proj", "v_proj", "out_proj"]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # init_lora_weights=False: random A and B, so the LoRA visibly changes the image.
        pipe.unet.add_adapter(LoraConfig(r=4, target_modules=unet_targets, init_lora_weights=False))
        layers: dict[str, Any] = {"unet_lora_layers": get_peft_model_state_dict(pipe.unet)}
        encoders = (
            ["text_encoder", "text_encoder_2"]
            if hasattr(pipe, "text_encoder_2")
            else ["text_encoder"]
        )
        for name in encoders:
            encoder = getattr(pipe, name)
            config = LoraConfig(r=4, target_modules=text_targets, init_lora_weights=False)
            inject_adapter_in_model(config, encoder)
            layers[f"{name}_lora_layers"] = get_peft_model_state_dict(encoder)
    dest.parent.mkdir(parents=True, exist_ok=True)
    type(pipe).save_lora_weights(dest.parent, weight_name=dest.name, **layers)
    return dest


def build_tiny_controlnet(architecture: Architecture = Architecture.SD1, *, seed: int = 1) -> Any:
    """A random ControlNet that fits the tiny pipeline of `architecture` (same UNet config),
    every weight random: a ControlNet's zero convolutions would otherwise make it do nothing."""
    import torch
    from diffusers import ControlNetModel

    unet = build_tiny_pipeline(architecture).unet
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        # Four stages of the condition embedding: the image is brought down 8x, as the VAE.
        net = ControlNetModel.from_unet(unet, conditioning_embedding_out_channels=(8, 8, 16, 16))
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.copy_(torch.randn_like(parameter) * 0.2)
    return net


def build_tiny_controlnet_union(*, seed: int = 4) -> Any:
    """A random ControlNet Union (`ControlNetUnionModel`, 8 control types as xinsir's
    ProMax) for the tiny SDXL pipeline: the tiny SDXL ControlNet's config and Union parts
    sized to its first block (8 attention heads, as xinsir's)."""
    import torch
    from diffusers import ControlNetUnionModel

    config = dict(build_tiny_controlnet(Architecture.SDXL).config)
    config.pop("mid_block_type", None)  # a Union has no such setting
    channels = config["block_out_channels"][0]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = ControlNetUnionModel.from_config(
            {**config, "num_control_type": 8, "num_trans_channel": channels, "num_trans_head": 8,
             "num_trans_layer": 1, "num_proj_channel": channels}
        )  # fmt: skip
        with torch.no_grad():
            for parameter in net.parameters():
                parameter.copy_(torch.randn_like(parameter) * 0.2)
    return net


def write_tiny_controlnet(
    dest: Path, *, seed: int = 1, architecture: Architecture = Architecture.SD1,
    union: bool = False,
) -> Path:  # fmt: skip
    """`build_tiny_controlnet` (or the Union) saved as a diffusers folder (`config.json`
    and weights)."""
    net = (
        build_tiny_controlnet_union(seed=seed)
        if union
        else build_tiny_controlnet(architecture, seed=seed)
    )
    net.save_pretrained(dest)
    return dest


def write_tiny_controlnet_file(
    dest: Path,
    *,
    seed: int = 1,
    architecture: Architecture = Architecture.SD1,
    original: bool = True,
) -> Path:
    """The same ControlNet as `write_tiny_controlnet` (same seed, same weights), as one
    `.safetensors` file in the original key layout (`control_model.*`), or with diffusers'
    key names (as most SDXL ControlNets ship)."""
    from safetensors.torch import save_file

    from app.testing.tiny.original_layout import controlnet_to_original

    net = build_tiny_controlnet(architecture, seed=seed)
    dest.parent.mkdir(parents=True, exist_ok=True)
    save_file(controlnet_to_original(net) if original else net.state_dict(), str(dest))
    return dest


IP_ADAPTER_TOKENS = 4  # a plain IP-Adapter's image tokens ("proj.weight" is 4 x cross dim)


def write_tiny_ip_adapter(
    dest: Path, *, seed: int = 3, architecture: Architecture = Architecture.SD1
) -> Path:
    """A random IP-Adapter for the tiny pipeline of `architecture`, in the layout artists
    download (h94/IP-Adapter's `models/`): `dest/ip-adapter_tiny.safetensors` (image
    projection and each cross-attention's `to_k_ip`/`to_v_ip`) beside `dest/image_encoder/`
    (a tiny CLIPVisionModelWithProjection). Returns the weight file."""
    import torch
    from safetensors.torch import save_file
    from transformers import CLIPVisionConfig, CLIPVisionModelWithProjection

    unet = build_tiny_pipeline(architecture).unet
    cross, channels = unet.config.cross_attention_dim, list(unet.config.block_out_channels)
    image_dim = 16
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        encoder = CLIPVisionModelWithProjection(
            CLIPVisionConfig(
                hidden_size=32, intermediate_size=37, num_attention_heads=4, num_hidden_layers=2,
                image_size=32, patch_size=8, projection_dim=image_dim,
            )
        )  # fmt: skip
        state = {
            "image_proj.proj.weight": torch.randn(IP_ADAPTER_TOKENS * cross, image_dim) * 0.3,
            "image_proj.proj.bias": torch.randn(IP_ADAPTER_TOKENS * cross) * 0.1,
            "image_proj.norm.weight": 1 + torch.randn(cross) * 0.1,
            "image_proj.norm.bias": torch.randn(cross) * 0.1,
        }
        key_id = 1  # as diffusers numbers them: every processor counts, cross-attention odd
        for name in unet.attn_processors:
            if name.endswith("attn1.processor"):
                continue
            hidden = _hidden_size(name, channels)
            for part in ("to_k_ip", "to_v_ip"):
                state[f"ip_adapter.{key_id}.{part}.weight"] = torch.randn(hidden, cross) * 0.3
            key_id += 2
    dest.mkdir(parents=True, exist_ok=True)
    encoder.save_pretrained(dest / "image_encoder")
    weights = dest / "ip-adapter_tiny.safetensors"
    save_file({k: v.contiguous() for k, v in state.items()}, str(weights))
    return weights


def _hidden_size(processor: str, channels: list[int]) -> int:
    if processor.startswith("mid_block"):
        return channels[-1]
    block = int(processor.split(".")[1])
    return channels[block] if processor.startswith("down_blocks") else channels[::-1][block]


# ---------------------------------------------------------------- T5 (Flux, SD 3.x)

_T5_SPECIAL = ("<pad>", "</s>", "<unk>")  # ids 0, 1, 2 as in the released T5 vocabulary


def tiny_t5_tokenizer() -> Any:
    """A T5 (SentencePiece unigram) tokenizer over single characters, built in memory.

    Same special tokens, ids and post-processing (`</s>` appended) as the released T5
    vocabulary, so padding and truncation behave as with the real one."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import T5Tokenizer

    word_start = "\u2581"  # SentencePiece's mark for "a word starts here"
    pieces = [(token, 0.0) for token in _T5_SPECIAL] + [(word_start, -1.0)]
    pieces += [(c, -3.0) for c in _CHARS] + [(word_start + c, -2.0) for c in _CHARS]
    unigram = Tokenizer(models.Unigram(pieces, unk_id=_T5_SPECIAL.index("<unk>")))
    unigram.pre_tokenizer = pre_tokenizers.Metaspace()
    unigram.decoder = decoders.Metaspace()
    unigram.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    return T5Tokenizer(
        tokenizer_object=unigram,
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        extra_ids=0,
    )


def tiny_t5_encoder(*, d_model: int = 32, seed: int = 0) -> Any:
    """A two-layer T5 v1.1-style encoder (gated GELU) of the tiny tokenizer's vocabulary."""
    import torch
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=len(tiny_t5_tokenizer()),
        d_model=d_model,
        d_kv=8,
        d_ff=37,
        num_layers=2,
        num_heads=4,
        feed_forward_proj="gated-gelu",  # as T5 v1.1 / T5-XXL, which Flux and SD 3.x use
        relative_attention_num_buckets=8,
        pad_token_id=0,
        eos_token_id=1,
    )
    with torch.random.fork_rng():  # the caller's random stream stays untouched
        torch.manual_seed(seed)
        return T5EncoderModel(config).eval()


T5_FLOAT16_OVERFLOW_SCALE = 600.0  # gated products ~1e5: inf in float16 (65504 at most)


def overflow_t5_in_float16(encoder: Any) -> Any:
    """`encoder` (a tiny T5) with its feed-forward input weights scaled so that its gated
    activations overflow float16 (inf, then NaN) while float32 and bfloat16 stay finite,
    as the released T5 v1.1 XXL's do; the final norm brings its output back to size."""
    import torch

    with torch.no_grad():
        for block in encoder.encoder.block:
            feed_forward = block.layer[-1].DenseReluDense
            feed_forward.wi_0.weight.mul_(T5_FLOAT16_OVERFLOW_SCALE)
            feed_forward.wi_1.weight.mul_(T5_FLOAT16_OVERFLOW_SCALE)
    return encoder
