"""After the loop: upscalers, tiled upscale and the labelled grid of a grid job."""
