"""The denoising loop and what it carries between steps: schedules, img2img and inpaint starts,
variation noise, checkpoints, previews and every VAE call."""
