"""What the evaluate stage costs (`put bench fid-interval`, `put bench evaluate`): one FID interval at a real
evaluation's scale, and the parts of one variant's evaluation, from which put/bench/cost.py models the stage.
Features and images are synthetic: the speed depends on their sizes, not their content.
"""

from __future__ import annotations

import time
from unittest import mock

import numpy as np
import torch

from put.bench.common import environment
from put.config import preset as load_preset
from put.models.device import synchronize
from put.stats.bootstrap import Bootstrap, printed_decimals, resamples_for, workers
from put.stats.coverage import GaussianPair
from put.stats.fid_interval import Grams, fid_interval

PREVIOUS_RESAMPLES = 2000  # what the FID interval drew before (an SVD of an n x n matrix per resample)


def fid_gathered(grams: Grams, idx: np.ndarray) -> np.ndarray:
    """The previous method, kept to time it and to check the new one against: FID of the resampled rows idx
    (b, n) from the Gram matrices gathered at them, tr sqrt(S1 S2) as the sum of the singular values of the
    centred n x n cross Gram matrix."""
    n = idx.shape[-1]
    g11, g22, g12 = (k[idx[..., :, None], idx[..., None, :]] for k in (grams.k11, grams.k22, grams.k12))
    total = lambda g: g.sum(axis=(-2, -1))  # noqa: E731
    trace = lambda g: np.trace(g, axis1=-2, axis2=-1)  # noqa: E731
    mean_gap = (total(g11) + total(g22) - 2 * total(g12)) / n ** 2
    tr1 = (trace(g11) - total(g11) / n) / (n - 1)
    tr2 = (trace(g22) - total(g22) / n) / (n - 1)
    centred = (g12 - g12.mean(axis=-1, keepdims=True) - g12.mean(axis=-2, keepdims=True)
               + g12.mean(axis=(-2, -1), keepdims=True))
    return mean_gap + tr1 + tr2 - 2 * np.linalg.svd(centred / (n - 1), compute_uv=False).sum(axis=-1)


def bench_fid_interval(n: int, dim: int, resamples: int, previous_resamples: int = 8, seed: int = 0) -> dict:
    """One FID interval of n paired dim-d feature sets with `resamples` resamples (or the more its expanded level
    needs at n; the result says how many) on this CPU (all its cores), and
    the previous method's time per resample (measured on `previous_resamples` of them, one core as it ran)."""
    f1, f2 = GaussianPair(dim).draw(np.random.default_rng(seed), n)
    started = time.perf_counter()
    grams = Grams.of(f1, f2)
    gram_seconds = time.perf_counter() - started
    # at least what the expanded bounds over n units need (a small preset's n needs more than the default)
    resamples = max(resamples, resamples_for(Bootstrap.level, n))
    started = time.perf_counter()
    found = fid_interval(f1, f2, None, Bootstrap(resamples=resamples, min_units=2, seed=seed))
    seconds = time.perf_counter() - started
    idx = np.random.default_rng(seed).integers(0, n, size=(previous_resamples, n))
    started = time.perf_counter()
    fid_gathered(grams, idx)
    previous = (time.perf_counter() - started) / previous_resamples
    half = (found.hi - found.lo) / 2
    return {"benchmark": "fid_interval", "n": n, "dim": dim, "resamples": resamples, "workers": workers(),
            "seconds": seconds + gram_seconds, "gram_seconds": gram_seconds,
            "seconds_per_resample": seconds / resamples, "previous_seconds_per_resample": previous,
            "previous_resamples": PREVIOUS_RESAMPLES, "previous_seconds": previous * PREVIOUS_RESAMPLES,
            "half_width": half, "mc_error": found.mc_error,
            "printed_half_width": f"{half:.{printed_decimals(half, found.mc_error)}f}",
            **environment(torch.device("cpu"), False)}


def _seconds(run, repeats: int = 3) -> float:
    """Best of `repeats` runs (a shared machine's noise only ever adds time)."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def inception(device: torch.device) -> torch.nn.Module:
    """torch-fidelity's FID Inception (its real architecture) with random weights: its pretrained file need not be
    on this machine to time it."""
    import torch_fidelity.feature_extractor_inceptionv3 as module

    with mock.patch.object(torch.nn.Module, "load_state_dict", lambda self, *a, **k: None), \
            mock.patch.object(module, "load_state_dict_from_url", lambda *a, **k: {}):
        return module.FeatureExtractorInceptionV3("inception-v3-compat", ["2048"]).eval().to(device)


def bench_evaluate(preset: str, device: torch.device, images: int = 16, seed: int = 0) -> dict:
    """The parts of one variant's evaluation of `preset`, per unit: PSNR/SSIM/MAE per result (CPU), Inception
    features per image and LPIPS per pair on `device`, a mean interval and an FID interval at the largest n (CPU)."""
    from put.metrics.diversity import lpips_model
    from put.metrics.image import image_metrics
    from put.stats.bootstrap import mean_interval

    config = load_preset(preset)
    size, protocol = config.model.image_size, config.evaluate
    rng = np.random.default_rng(seed)
    pictures = rng.integers(0, 256, size=(images, size, size, 3), dtype=np.uint8)
    per_result = _seconds(lambda: [image_metrics(a, b, protocol) for a, b in zip(pictures, pictures[::-1])]) / images

    batch = torch.rand(images, 3, size, size, device=device)
    net = inception(device)
    with torch.no_grad():
        def extract() -> None:
            net((batch * 255).to(torch.uint8))
            synchronize(device)
        per_image = _seconds(extract) / images
        lpips = lpips_model(protocol.lpips_net, protocol.lpips_spatial, random_backbone=True).to(device)
        per_pair = _seconds(lambda: (lpips(batch * 2 - 1, batch.flip(0) * 2 - 1), synchronize(device))) / images

    n = config.data.eval_count or _test_images(config.data.dataset)
    rows = n * config.sample.diversity_samples
    values, units = rng.normal(20, 3, rows), np.repeat(np.arange(n), config.sample.diversity_samples)
    mean_seconds = _seconds(lambda: mean_interval(values, units, Bootstrap.of(protocol)), repeats=1)
    fid = bench_fid_interval(n, 2048, protocol.fid_bootstrap_resamples, previous_resamples=1)
    return {"benchmark": "evaluate", "preset": preset, "image_size": size, "test_images": n,
            "seconds_per_result": per_result, "inception_seconds_per_image": per_image,
            "lpips_seconds_per_pair": per_pair, "mean_interval_seconds": mean_seconds,
            "fid_interval_seconds": fid["seconds"], "fid_resamples": protocol.fid_bootstrap_resamples,
            "bootstrap_resamples": protocol.bootstrap_resamples, "cpu_workers": workers(),
            **environment(device, False)}


def _test_images(dataset: str) -> int:
    from put.bench.cost import TEST_IMAGES

    return TEST_IMAGES[dataset]


def bench_fid_routes(sizes: list[int], dim: int = 2048, resamples: int = 2, gram_up_to: int = 8192) -> list[dict]:
    """CPU seconds per resample of FID's two routes (put/stats/fid_interval.py) at each n: n x n Gram matrices
    (up to `gram_up_to` images: 3 n^2 floats) and d x d covariances, on `resamples` multinomial resamples of
    paired Gaussian features, one BLAS thread (as the interval's threads run)."""
    from threadpoolctl import threadpool_limits

    from put.stats.fid_interval import Moments, fid_weighted

    rows = []
    for n in sizes:
        f1, f2 = GaussianPair(dim).draw(np.random.default_rng(0), n)
        weights = np.random.default_rng(1).multinomial(n, np.full(n, 1 / n), size=resamples).astype(float)
        row = {"benchmark": "fid_routes", "n": n, "dim": dim, "resamples": resamples}
        for route, kind in (("moments", Moments), ("gram", Grams)):
            if route == "gram" and n > gram_up_to:
                continue
            with threadpool_limits(limits=1, user_api="blas"):
                started = time.process_time()
                stats = kind.of(f1, f2)
                setup = time.process_time() - started
                started = time.process_time()
                values = fid_weighted(stats, weights)
                row[route] = {"setup_cpu_seconds": setup, "cpu_seconds_per_resample":
                              (time.process_time() - started) / resamples, "fid": values.tolist()}
            del stats
        rows.append({**row, **environment(torch.device("cpu"), False)})
    return rows
