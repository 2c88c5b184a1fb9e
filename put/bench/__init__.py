"""Benchmarks: sampling, P-VQVAE, training steps, the data loader, evaluation, and what each preset costs."""
