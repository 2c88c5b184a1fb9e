"""The tiny training the training tests run (tests/test_training.py, test_tracking_spool.py, gpu/test_cuda.py): its
params, the params of a working folder as the `workdir` fixture (conftest.py) builds one, and a SIGTERM at a
given step."""

from __future__ import annotations

import os
import signal

from put.config.params import load_params

TINY_PARAMS = {
    "preset": "demo",
    "overrides": {
        "model": {"image_size": 32,
                  "pvqvae": {"embed_dim": 16, "width": 16, "base_channels": 4, "num_res_blocks": 1,
                             "codebook_size": 16},
                  "transformer": {"n_layer": 2, "n_head": 2, "n_embd": 32}},
        "pvqvae_train": {"iterations": 8, "batch_size": 4, "warmup": 2, "checkpoint_every": 3, "log_every": 2,
                         "eval_every": 4, "eval_images": 4, "discriminator_width": 8,
                         "loss": {"delayed_start": 4, "perceptual": 0, "style": 0}},
        "transformer_train": {"iterations": 8, "batch_size": 4, "warmup": 2, "checkpoint_every": 3,
                              "log_every": 2, "eval_every": 4, "eval_images": 4},
    },
}


def params(workdir):
    return load_params(workdir / "params.yaml")


def stop_at(step_to_stop: int, task_cls):
    """Patch a task class so that the process receives SIGTERM during the given step."""
    original = task_cls.train_step

    def train_step(self, batch, step):
        if step == step_to_stop:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, batch, step)

    return train_step
