"""Where every pipeline artefact lives, relative to the repository root: one pattern per artefact.

Placeholders: `{preset}`, `{variant}`, `{pvqvae}` (the variant whose P-VQVAE it uses: `tok` and `qua0` use
`put`'s), `{official}` (`with_official`), `{external}` (`with_external`) and `{seed}` (`with_replicate`).
One concrete path: `path_of`.
"""

from __future__ import annotations

from pathlib import Path

from put.config import PVQVAE_OF_VARIANT
from put.config.external import EXTERNAL_PREFIX
from put.config.params import OFFICIAL_PREFIX, replicate_label

RESOLVED_PARAMS = "results/{preset}/resolved_params.yaml"
CODE_VERSIONS = "results/{preset}/code_versions.yaml"  # each stage command's code version (put/dag/code.py)
SPLIT_DIR = "data/{preset}/splits"
PREPARED_DIR = "data/{preset}/prepared"  # the training and test images, resized once (put/data/prepared.py)
MASKS_DIR = "data/{preset}/masks"  # frozen evaluation masks (manifest.csv) and the ground truth (gt/)
RUN_DIR = "runs/{preset}/{variant}"  # a variant's trained (or imported) models
PVQVAE_CHECKPOINT = "runs/{preset}/{pvqvae}/pvqvae.pt"
PVQVAE_CURVES = "runs/{preset}/{pvqvae}/pvqvae_curves"  # a training's curves: TRAIN_CURVE and EVAL_CURVE
TRANSFORMER_CHECKPOINT = "runs/{preset}/{variant}/transformer.pt"
TRANSFORMER_CURVES = "runs/{preset}/{variant}/transformer_curves"
SAMPLES_DIR = "results/{preset}/samples/{variant}"
METRICS_FILE = "results/{preset}/metrics/{variant}.json"
BENCH_DIR = "results/{preset}/bench"
FRONTIER_DIR = "results/{preset}/frontier"  # metrics, table, figure (small: kept in git)
FRONTIER_METRICS = FRONTIER_DIR + "/metrics.json"
FRONTIER_CSV = FRONTIER_DIR + "/frontier.csv"
FRONTIER_SAMPLES = "results/{preset}/frontier_samples"
# The tpami variant's frontier (the TPAMI 2024 model beside the CVPR one): the same files under these folders.
FRONTIER_TPAMI_DIR, FRONTIER_TPAMI_SAMPLES = FRONTIER_DIR + "_tpami", FRONTIER_SAMPLES + "_tpami"
TRAIN_CURVE, EVAL_CURVE = "train.csv", "eval.csv"
REPORT_DIR = "reports/{preset}"
# Compiled from REPORT_DIR/report.tex when pdflatex exists. Outside REPORT_DIR, which the DAG's front ends
# clear before the report stage runs: a machine without pdflatex never deletes the committed PDF.
REPORT_PDF = "reports/{preset}.pdf"
LOG_DIR = "logs/{preset}"  # Snakemake: one log per job, logs/<preset>/<rule>[/<variant>].log
BENCHMARKS_DIR = "reports/benchmarks"  # committed measurements (this machine's and GPUs'), see benchmark_dir


def path_of(pattern: str, preset: str, variant: str = "put", **extra: str) -> Path:
    """One concrete path; `{pvqvae}` follows from the variant."""
    return Path(pattern.format(preset=preset, variant=variant, pvqvae=PVQVAE_OF_VARIANT.get(variant, variant),
                               **extra))


def with_variant(pattern: str, variant: str) -> str:
    """The pattern for one fixed variant (other placeholders kept)."""
    return pattern.replace("{variant}", variant).replace("{pvqvae}", PVQVAE_OF_VARIANT[variant])


def with_official(pattern: str) -> str:
    """The pattern for the official entry `{official}` (params.yaml's `official`), under its label official_<name>:
    it has its own P-VQVAE (imported from its checkpoint)."""
    label = OFFICIAL_PREFIX + "{official}"
    return pattern.replace("{variant}", label).replace("{pvqvae}", label)


def with_external(pattern: str) -> str:
    """The pattern for the external entry `{external}` (params.yaml's `external`), under its label external_<name>."""
    return pattern.replace("{variant}", EXTERNAL_PREFIX + "{external}")


def with_replicate(pattern: str, variant: str) -> str:
    """The pattern for seed replicate `{seed}` of one variant, under the label <variant>_seed<seed> (its P-VQVAE:
    the same replicate of the variant it uses)."""
    return (pattern.replace("{variant}", replicate_label(variant, "{seed}"))
            .replace("{pvqvae}", replicate_label(PVQVAE_OF_VARIANT[variant], "{seed}")))


def split_dir(preset: str) -> Path:
    return path_of(SPLIT_DIR, preset)


def masks_dir(preset: str) -> Path:
    return path_of(MASKS_DIR, preset)


def samples_dir(preset: str, variant: str) -> Path:
    return path_of(SAMPLES_DIR, preset, variant)


def metrics_info_file(metrics: Path) -> Path:
    """Beside a metrics file: what DVC's flat numbers leave out (protocol, sampling, why a value is missing)."""
    return Path(metrics).with_name(f"{Path(metrics).stem}_info.json")


def metrics_bins_file(metrics: Path) -> Path:
    """Beside a metrics file: the fine-bin values against the hole ratio, a CSV `dvc plots` can draw."""
    return Path(metrics).with_name(f"{Path(metrics).stem}_bins.csv")


def metrics_images_file(metrics: Path) -> Path:
    """Beside a metrics file: every per-image value behind its means (the bootstrap's and the paired
    differences' input)."""
    return Path(metrics).with_name(f"{Path(metrics).stem}_images.csv")


def pasted_metrics_file(metrics: Path) -> Path:
    """The metrics file of the same evaluation under the ranked compositing rule, known pixels pasted back
    (put.config.evaluation.RANKED_RULE): the evaluate stage writes its Table 1 groups so into a `pasted/` folder
    beside its main files, same names (info, bins and per-image values beside it as beside any metrics file)."""
    return Path(metrics).parent / "pasted" / Path(metrics).name


METRICS_INFO = metrics_info_file(Path(METRICS_FILE)).as_posix()
METRICS_BINS = metrics_bins_file(Path(METRICS_FILE)).as_posix()
METRICS_IMAGES = metrics_images_file(Path(METRICS_FILE)).as_posix()
# the evaluate stage's four files under the ranked rule, by the name of their kind
PASTED_FILES = {name: write(pasted_metrics_file(Path(METRICS_FILE))).as_posix() for name, write in
                (("metrics", Path), ("info", metrics_info_file), ("bins", metrics_bins_file),
                 ("images", metrics_images_file))}


def benchmark_dir() -> Path:
    """The committed benchmark figures (`make bench`, tools/gpu/measure.sh; not a DAG output), which the report
    reads beside its own bench stage's."""
    return Path(BENCHMARKS_DIR)
