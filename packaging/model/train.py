"""Train Easel's bundled text-to-image model (easel-tiny) from scratch on CPU.

Run from the repository root (as a script: the repo's ``packaging/`` folder is
shadowed by the pip ``packaging`` distribution, so ``python -m`` cannot find it):

    nice -n 19 .venv/bin/python packaging/model/train.py \
        --out resources/models/easel-tiny --vae-minutes 19 --unet-minutes 70

(The shipped model's exact multi-stage commands are in
resources/models/easel-tiny/README.md.)

Phase 1 trains the VAE on procedurally drawn pictures; phase 2 caches their
latents and trains the UNet and the CLIP text encoder together. Both phases
stop on a wall-clock budget, and the script saves loadable pipelines along the
way so a usable model exists even if it is interrupted.
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from architecture import MAX_TOKENS, make_scheduler, make_text_encoder, make_unet, make_vae
from diffusers import AutoencoderKL, DDIMScheduler, StableDiffusionPipeline, UNet2DConditionModel
from shapes_data import VOCABULARY, make_dataset
from transformers import CLIPTextModel, CLIPTokenizer
from vocab import build_tokenizer

log = logging.getLogger("easel.train")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--out", type=Path, required=True, help="final pipeline directory")
    p.add_argument("--work-dir", type=Path, default=Path("/tmp/easel-train"))
    p.add_argument(
        "--smoke-out",
        type=Path,
        default=Path("/tmp/easel-smoke-model"),
        help="early pipeline (trained VAE, untrained UNet) for integration testing",
    )
    p.add_argument("--vae-minutes", type=float, default=9.0)
    p.add_argument("--unet-minutes", type=float, default=70.0)
    p.add_argument("--checkpoint-minutes", type=float, default=10.0)
    p.add_argument("--n-images", type=int, default=40000)
    p.add_argument("--vae-batch", type=int, default=16)
    p.add_argument("--unet-batch", type=int, default=32)
    p.add_argument("--unet-lr", type=float, default=5e-4)
    p.add_argument("--text-lr", type=float, default=5e-4)
    p.add_argument("--snr-gamma", type=float, default=5.0)
    p.add_argument("--caption-dropout", type=float, default=0.1)
    p.add_argument("--ema-decay", type=float, default=0.999)
    p.add_argument("--vae-init", type=Path, default=None, help="continue training this VAE")
    p.add_argument("--vae-crop", type=int, default=32, help="VAE training crop size")
    p.add_argument("--vae-lr", type=float, default=1e-3)
    p.add_argument("--reuse-vae", action="store_true", help="skip phase 1 if work-dir/vae exists")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def lr_factor(step: int, time_frac: float, warmup: int) -> float:
    """Linear warmup, then cosine decay to 10% over the *wall-clock* budget."""
    warm = min(1.0, (step + 1) / warmup)
    return warm * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(1.0, time_frac))))


def to_pixels(images: np.ndarray) -> torch.Tensor:
    """uint8 (N, H, W, 3) -> float (N, 3, H, W) in [-1, 1]."""
    return torch.from_numpy(images).permute(0, 3, 1, 2).float().div(127.5).sub(1.0)


# ---------------------------------------------------------------- phase 1: VAE


def random_crops(images: np.ndarray, crop: int, gen: np.random.Generator) -> np.ndarray:
    """One random ``crop`` x ``crop`` window per image."""
    if crop >= images.shape[1]:
        return images
    ys, xs = gen.integers(0, images.shape[1] - crop + 1, size=(2, len(images)))
    return np.stack(
        [im[y : y + crop, x : x + crop] for im, y, x in zip(images, ys, xs, strict=True)]
    )


def train_vae(images: np.ndarray, args: argparse.Namespace) -> AutoencoderKL:
    # The VAE is fully convolutional without attention, so training on crops
    # teaches the same thing at a fraction of the CPU cost per step.
    vae = AutoencoderKL.from_pretrained(args.vae_init) if args.vae_init else make_vae()
    opt = torch.optim.AdamW(vae.parameters(), lr=args.vae_lr, weight_decay=0.0)
    gen = np.random.default_rng(args.seed + 1)
    budget = args.vae_minutes * 60.0
    start, step, running = time.monotonic(), 0, 0.0
    vae.train()
    while (elapsed := time.monotonic() - start) < budget:
        for group in opt.param_groups:
            group["lr"] = args.vae_lr * lr_factor(step, elapsed / budget, warmup=100)
        batch = images[gen.integers(0, len(images), args.vae_batch)]
        x = to_pixels(random_crops(batch, args.vae_crop, gen))
        posterior = vae.encode(x).latent_dist
        recon = vae.decode(posterior.sample()).sample
        # L1 keeps flat colours exact; the KL term is only a leash on latent scale.
        loss = F.l1_loss(recon, x) + F.mse_loss(recon, x) + 1e-6 * posterior.kl().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(vae.parameters(), 1.0)
        opt.step()
        running = 0.98 * running + 0.02 * loss.item() if step else loss.item()
        step += 1
        if step % 100 == 0:
            log.info("vae step %d loss %.4f (%.1f steps/s)", step, running, step / elapsed)
    log.info(
        "vae done: %d steps in %.1f min, loss %.4f", step, (time.monotonic() - start) / 60, running
    )
    vae.eval()
    return vae


@torch.no_grad()
def encode_latents(vae: AutoencoderKL, images: np.ndarray, batch: int = 256) -> torch.Tensor:
    """Posterior means of all images (unscaled)."""
    chunks = [
        vae.encode(to_pixels(images[i : i + batch])).latent_dist.mean
        for i in range(0, len(images), batch)
    ]
    return torch.cat(chunks)


# ------------------------------------------------------ phase 2: UNet + text


class Ema:
    """Exponential moving average of a set of modules' parameters."""

    def __init__(self, modules: list[torch.nn.Module], decay: float) -> None:
        self.decay = decay
        self.models = [copy.deepcopy(m).eval().requires_grad_(False) for m in modules]
        self.src = [list(m.parameters()) for m in modules]
        self.dst = [list(m.parameters()) for m in self.models]
        self.updates = 0

    @torch.no_grad()
    def update(self) -> None:
        self.updates += 1
        # Short warmup so early checkpoints are not dominated by the random init.
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for src, dst in zip(self.src, self.dst, strict=True):
            torch._foreach_lerp_(dst, src, 1.0 - decay)


def tokenize(tokenizer: CLIPTokenizer, captions: list[str]) -> torch.Tensor:
    # Identical to StableDiffusionPipeline.encode_prompt: pad to max length.
    return tokenizer(
        captions, padding="max_length", max_length=MAX_TOKENS, truncation=True, return_tensors="pt"
    ).input_ids


def v_prediction_loss(
    unet: UNet2DConditionModel,
    text_encoder: CLIPTextModel,
    latents: torch.Tensor,
    ids: torch.Tensor,
    alphas_cumprod: torch.Tensor,
    snr_gamma: float,
) -> torch.Tensor:
    t = torch.randint(0, len(alphas_cumprod), (len(latents),))
    ab = alphas_cumprod[t].view(-1, 1, 1, 1)
    noise = torch.randn_like(latents)
    noisy = ab.sqrt() * latents + (1 - ab).sqrt() * noise
    target = ab.sqrt() * noise - (1 - ab).sqrt() * latents
    pred = unet(noisy, t, encoder_hidden_states=text_encoder(ids)[0]).sample
    # v-loss equals x0-loss weighted by (SNR + 1); clamping that weight at gamma
    # (min-SNR style) stops easy low-noise steps from dominating while keeping
    # full weight on the high-noise steps where colours and layout are decided.
    snr = ab.view(-1) / (1 - ab.view(-1))
    weight = torch.clamp(snr + 1, max=snr_gamma) / (snr + 1)
    per_sample = F.mse_loss(pred, target, reduction="none").mean(dim=(1, 2, 3))
    return (weight * per_sample).mean()


def save_pipeline(
    path: Path,
    vae: AutoencoderKL,
    text_encoder: CLIPTextModel,
    unet: UNet2DConditionModel,
    tokenizer: CLIPTokenizer,
    scheduler: DDIMScheduler,
) -> None:
    pipe = StableDiffusionPipeline(
        vae=vae,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        unet=unet,
        scheduler=scheduler,
        safety_checker=None,
        feature_extractor=None,
        requires_safety_checker=False,
    )
    pipe.save_pretrained(path, safe_serialization=True)
    log.info("saved pipeline to %s", path)


def train_unet(
    latents: torch.Tensor,
    ids: torch.Tensor,
    tokenizer: CLIPTokenizer,
    vae: AutoencoderKL,
    scheduler: DDIMScheduler,
    args: argparse.Namespace,
) -> Ema:
    unet, text_encoder = make_unet(), make_text_encoder(tokenizer)
    log.info(
        "unet %.2fM params, text encoder %.2fM params",
        sum(p.numel() for p in unet.parameters()) / 1e6,
        sum(p.numel() for p in text_encoder.parameters()) / 1e6,
    )
    opt = torch.optim.AdamW(
        [
            {"params": list(unet.parameters()), "base_lr": args.unet_lr},
            {"params": list(text_encoder.parameters()), "base_lr": args.text_lr},
        ],
        weight_decay=0.01,
    )
    ema = Ema([unet, text_encoder], args.ema_decay)
    empty_ids = tokenize(tokenizer, [""])[0]
    alphas_cumprod = scheduler.alphas_cumprod.float()
    gen = np.random.default_rng(args.seed + 2)
    budget, ckpt_every = args.unet_minutes * 60.0, args.checkpoint_minutes * 60.0
    start, last_ckpt, step, running = time.monotonic(), time.monotonic(), 0, 0.0
    unet.train()
    text_encoder.train()
    while (elapsed := time.monotonic() - start) < budget:
        for group in opt.param_groups:
            group["lr"] = group["base_lr"] * lr_factor(step, elapsed / budget, warmup=300)
        idx = torch.from_numpy(gen.integers(0, len(latents), args.unet_batch))
        batch_ids = ids[idx].clone()
        # Caption dropout teaches the unconditional branch that CFG needs.
        drop = torch.from_numpy(gen.random(args.unet_batch) < args.caption_dropout)
        batch_ids[drop] = empty_ids
        loss = v_prediction_loss(
            unet, text_encoder, latents[idx], batch_ids, alphas_cumprod, args.snr_gamma
        )
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(
            list(unet.parameters()) + list(text_encoder.parameters()), 1.0
        )
        opt.step()
        ema.update()
        running = 0.99 * running + 0.01 * loss.item() if step else loss.item()
        step += 1
        if step % 100 == 0:
            log.info(
                "unet step %d loss %.4f (%.2f steps/s, %.1f min)",
                step,
                running,
                step / elapsed,
                elapsed / 60,
            )
        if time.monotonic() - last_ckpt > ckpt_every:
            unet_ema, text_ema = ema.models
            save_pipeline(
                args.work_dir / "checkpoint", vae, text_ema, unet_ema, tokenizer, scheduler
            )
            last_ckpt = time.monotonic()
    log.info(
        "unet done: %d steps in %.1f min, loss %.4f", step, (time.monotonic() - start) / 60, running
    )
    return ema


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.work_dir.mkdir(parents=True, exist_ok=True)

    tokenizer = build_tokenizer(VOCABULARY, args.work_dir / "tokenizer-src", max_length=MAX_TOKENS)
    scheduler = make_scheduler()
    images, captions = make_dataset(args.n_images, seed=args.seed)
    log.info("dataset: %d images, e.g. %r", len(images), captions[0])

    vae_dir = args.work_dir / "vae"
    if args.reuse_vae and vae_dir.exists():
        vae = AutoencoderKL.from_pretrained(vae_dir).eval()
    else:
        vae = train_vae(images, args)
    latents = encode_latents(vae, images)
    # Standard SD latent scaling: unit variance for the diffusion model.
    vae.register_to_config(scaling_factor=float(1.0 / latents.std()))
    latents = latents * vae.config.scaling_factor
    log.info(
        "latent scaling factor %.4f, channel means %s",
        vae.config.scaling_factor,
        latents.mean(dim=(0, 2, 3)).numpy().round(3),
    )
    vae.save_pretrained(vae_dir)
    vae.requires_grad_(False)
    save_pipeline(
        args.smoke_out, vae, make_text_encoder(tokenizer), make_unet(), tokenizer, scheduler
    )

    ids = tokenize(tokenizer, captions)
    ema = train_unet(latents, ids, tokenizer, vae, scheduler, args)
    unet, text_encoder = ema.models
    save_pipeline(args.out, vae, text_encoder, unet, tokenizer, scheduler)


if __name__ == "__main__":
    main()
