"""Model configurations for easel-tiny (standard Stable Diffusion component classes)."""

from __future__ import annotations

from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
from transformers import CLIPTextConfig, CLIPTextModel, CLIPTokenizer

IMAGE_SIZE = 64
LATENT_SIZE = 16  # VAE downsamples by 4
LATENT_CHANNELS = 4
TEXT_DIM = 128
MAX_TOKENS = 16


def make_vae() -> AutoencoderKL:
    # Three encoder blocks = two downsamples = factor 4. No mid-block attention:
    # flat-colour images need none and it is the slowest part on CPU.
    return AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",) * 3,
        up_block_types=("UpDecoderBlock2D",) * 3,
        block_out_channels=(16, 32, 64),
        layers_per_block=1,
        latent_channels=LATENT_CHANNELS,
        norm_num_groups=8,
        sample_size=IMAGE_SIZE,
        mid_block_add_attention=False,
    )


def make_text_encoder(tokenizer: CLIPTokenizer) -> CLIPTextModel:
    # Wider than the feasibility run (64 -> 128): colour words must carry their
    # role ("shape colour" vs "background colour") into the UNet.
    config = CLIPTextConfig(
        vocab_size=len(tokenizer),
        hidden_size=TEXT_DIM,
        intermediate_size=TEXT_DIM * 4,
        num_hidden_layers=3,
        num_attention_heads=4,
        max_position_embeddings=MAX_TOKENS,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return CLIPTextModel(config)


def make_unet() -> UNet2DConditionModel:
    return UNet2DConditionModel(
        sample_size=LATENT_SIZE,
        in_channels=LATENT_CHANNELS,
        out_channels=LATENT_CHANNELS,
        # Cross-attention only at 8x8 and 4x4: the 16x16 level is about edges,
        # and attention there would dominate the CPU step time.
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"),
        up_block_types=("CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"),
        block_out_channels=(32, 64, 64),
        layers_per_block=1,
        cross_attention_dim=TEXT_DIM,
        attention_head_dim=2,  # diffusers quirk: this is the number of heads
        norm_num_groups=16,
        # A pooled text embedding added to the timestep embedding conditions
        # every ResNet block globally, which is what background colour needs.
        # The stock pipeline supports it: it pools encoder_hidden_states itself.
        addition_embed_type="text",
        addition_embed_type_num_heads=4,
    )


def make_scheduler() -> DDIMScheduler:
    # Zero terminal SNR + v-prediction: at the first sampling step the model sees
    # pure noise and must take the colours from the text. With SD's default
    # schedule some of the image's mean colour survives at t=999 during training,
    # so at inference the random mean of the starting noise picks the colours.
    return DDIMScheduler(
        num_train_timesteps=1000,
        beta_start=0.00085,
        beta_end=0.012,
        beta_schedule="scaled_linear",
        prediction_type="v_prediction",
        rescale_betas_zero_snr=True,
        timestep_spacing="trailing",
        clip_sample=False,
        set_alpha_to_one=False,
        steps_offset=1,
    )
