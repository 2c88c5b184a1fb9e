"""The two models (P-VQVAE, UQ-Transformer), their losses and discriminator: tensors in, tensors out."""
