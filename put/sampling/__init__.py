"""Sampling tokens for masked patches: schedules, the eager sampler, the captured engine, inpainting files."""
