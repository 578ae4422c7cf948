"""Fine-tune only the VAE decoder of a trained easel-tiny pipeline, in place.

The encoder (and therefore the latent space the UNet was trained on) stays
frozen, so this sharpens decoded images without invalidating the UNet: the
same trick as Stable Diffusion's "ft-MSE" VAE. Run it after train.py:

    nice -n 19 .venv/bin/python packaging/model/finetune_decoder.py \
        --model resources/models/easel-tiny --minutes 8
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from diffusers import AutoencoderKL
from shapes_data import make_dataset
from train import lr_factor, to_pixels

log = logging.getLogger("easel.finetune_decoder")


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--model", type=Path, required=True, help="pipeline directory (vae/ updated)")
    p.add_argument("--minutes", type=float, default=8.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--lr", type=float, default=5e-4)
    p.add_argument("--n-images", type=int, default=8000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--seed", type=int, default=1)
    return p.parse_args()


def main() -> None:
    args = parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    vae = AutoencoderKL.from_pretrained(args.model / "vae")
    vae.requires_grad_(False)
    trainable = [*vae.decoder.parameters(), *vae.post_quant_conv.parameters()]
    for p in trainable:
        p.requires_grad_(True)
    # A different seed from train.py: fresh pictures, same distribution.
    images, _ = make_dataset(args.n_images, seed=1000 + args.seed)
    opt = torch.optim.AdamW(trainable, lr=args.lr, weight_decay=0.0)
    gen = np.random.default_rng(args.seed)
    budget = args.minutes * 60.0
    start, step, running = time.monotonic(), 0, 0.0
    vae.decoder.train()
    while (elapsed := time.monotonic() - start) < budget:
        for group in opt.param_groups:
            group["lr"] = args.lr * lr_factor(step, elapsed / budget, warmup=20)
        x = to_pixels(images[gen.integers(0, len(images), args.batch)])
        with torch.no_grad():
            # The UNet produces clean latents, so decode the posterior mean.
            z = vae.encode(x).latent_dist.mean
        recon = vae.decode(z).sample
        loss = F.l1_loss(recon, x) + F.mse_loss(recon, x)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        opt.step()
        running = 0.95 * running + 0.05 * loss.item() if step else loss.item()
        step += 1
        if step % 25 == 0:
            log.info("decoder step %d loss %.4f", step, running)
    log.info("decoder done: %d steps in %.1f min, loss %.4f", step, elapsed / 60, running)
    vae.eval()
    vae.save_pretrained(args.model / "vae", safe_serialization=True)


if __name__ == "__main__":
    main()
