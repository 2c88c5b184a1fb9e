"""The pipeline's DAG, declared once: every stage as one `python -m put <command>` call, its files and its fan-out
(variant, P-VQVAE, `official`/`external` entry, seed), from which dvc.yaml and the Snakefile are built
(docs/dvc-snakemake.md, "One declaration, two front ends")."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from put.config import PVQVAE_VARIANTS, TPAMI_VARIANT, VARIANTS, paths
from put.config.masks import TRAINING_MASK_KEYS
from put.config.params import settings_prefix

FanOut = Literal["none", "variants", "pvqvae_variants", "official", "external", "seeds"]


@dataclass(frozen=True)
class Output:
    """A declared output, keyed in `Stage.outputs` by the command-line option that takes its path, or, for a
    file the command writes beside another output (not on the command line), by a plain name."""

    pattern: str
    directory: bool = False
    cache: bool = True     # False: small files kept in git (metrics, tables, curves), not in DVC's cache
    metrics: bool = False  # a file of plain numbers for `dvc metrics`
    declared: bool = True  # False: a folder passed on the command line, whose files are the declared outputs


@dataclass(frozen=True)
class Evaluated:
    """An input option taking a folder in which the command reads one file of `pattern` per evaluated model:
    every ablation variant and every official entry (the report reads all metrics files)."""

    pattern: str

    @property
    def folder(self) -> str:
        return self.pattern.rsplit("/", 1)[0]


@dataclass(frozen=True)
class OfficialFile:
    """An input path given by a field of the stage's entry of params.yaml's `official` (its .pth file)."""

    field: str


Input = str | Evaluated | OfficialFile


@dataclass(frozen=True)
class Stage:
    name: str
    command: str                                  # `python -m put <command>`
    inputs: dict[str, Input]                      # option -> path pattern
    outputs: dict[str, Output]                    # option (or name, see Output) -> output
    params: tuple[str, ...]                       # sections of the resolved parameters ({variant} allowed, and
                                                  # {settings}: where the variant's training sections lie)
    fan_out: FanOut = "none"
    training: bool = False                        # resumable; takes --gpus; `exec`'d under Snakemake
    tracked: bool = False                         # logs to MLflow; takes --tag (the DVC stage / Snakemake rule)
    report: bool = False                          # its outputs go into `snakemake --report`
    variant: str | None = None                    # a `seeds` stage's variant, or the one a single stage runs
    replica_of: str | None = None                 # the stage whose Slurm resources it takes (a `seeds` stage's,
                                                  # the tpami frontier's)

    @property
    def variants(self) -> tuple[str, ...]:
        """The static fan-out (an `official`, `external` or `seeds` stage's instances come from the parameters:
        graph.instances)."""
        return {"none": (), "variants": VARIANTS, "pvqvae_variants": PVQVAE_VARIANTS, "official": (), "external": (),
                "seeds": ()}[self.fan_out]

    def key(self, variant: str | None = None) -> str:
        """The stage's name as both front ends print it: `train_pvqvae@conv` (DVC's foreach naming)."""
        return f"{self.name}@{variant}" if variant else self.name


def for_official(stage: Stage) -> Stage:
    """The same stage once per official entry: its files under the label official_<name>."""
    return replace(stage, name=f"{stage.name}_official", fan_out="official",
                   inputs={o: paths.with_official(p) if isinstance(p, str) else p for o, p in stage.inputs.items()},
                   outputs={o: replace(out, pattern=paths.with_official(out.pattern))
                            for o, out in stage.outputs.items()})


def for_external(stage: Stage) -> Stage:
    """The same stage once per external entry: its files under the label external_<name>."""
    return replace(stage, name=f"{stage.name}_external", fan_out="external",
                   inputs={o: paths.with_external(p) if isinstance(p, str) else p for o, p in stage.inputs.items()},
                   outputs={o: replace(out, pattern=paths.with_external(out.pattern))
                            for o, out in stage.outputs.items()})


def for_seeds(stage: Stage, variant: str) -> Stage:
    """One variant's stage once per seed replicate: its files under the label <variant>_seed<seed>."""
    return replace(stage, name=f"{stage.name}_{variant}", fan_out="seeds", variant=variant,
                   replica_of=stage.name,
                   inputs={o: paths.with_replicate(p, variant) if isinstance(p, str) else p
                           for o, p in stage.inputs.items()},
                   outputs={o: replace(out, pattern=paths.with_replicate(out.pattern, variant))
                            for o, out in stage.outputs.items()},
                   params=tuple(p.replace("{variant}", variant).replace("{settings}", settings_prefix(variant))
                                for p in stage.params))


TRAINING_MASKS = tuple(f"masks.{key}" for key in TRAINING_MASK_KEYS)
CONFIG = Stage(
    "config", "config", inputs={},
    outputs={"--out": Output(paths.RESOLVED_PARAMS, cache=False),
             "--code-versions": Output(paths.CODE_VERSIONS, cache=False)}, params=())
SAMPLE = Stage(
    "sample", "sample",
    inputs={"--checkpoint": paths.TRANSFORMER_CHECKPOINT, "--pvqvae": paths.PVQVAE_CHECKPOINT,
            "--masks": paths.MASKS_DIR},
    outputs={"--out": Output(paths.SAMPLES_DIR, directory=True)},
    params=("sample",), fan_out="variants", tracked=True)
EVALUATE = Stage(
    "evaluate", "evaluate", inputs={"--samples": paths.SAMPLES_DIR, "--masks": paths.MASKS_DIR},
    outputs={"--out": Output(paths.METRICS_FILE, cache=False, metrics=True),
             "info": Output(paths.METRICS_INFO, cache=False), "bins": Output(paths.METRICS_BINS, cache=False),
             "images": Output(paths.METRICS_IMAGES, cache=False),
             # the same results' Table 1 groups scored with the known pixels pasted back (Table 1's ranked rule)
             **{f"pasted_{name}": Output(paths.PASTED_FILES[name], cache=False) for name in paths.PASTED_FILES}},
    params=("evaluate", "sample.top_k", "sample.seed"), fan_out="variants", tracked=True)
TRAIN_PVQVAE = Stage(
    "train_pvqvae", "train-pvqvae", inputs={"--split": paths.SPLIT_DIR, "--prepared": paths.PREPARED_DIR},
    outputs={"--out": Output(paths.PVQVAE_CHECKPOINT),
             "--curves": Output(paths.PVQVAE_CURVES, directory=True, cache=False)},
    params=("variants.{variant}", "data", *TRAINING_MASKS, "{settings}pvqvae_train"), fan_out="pvqvae_variants",
    training=True, tracked=True)
TRAIN_TRANSFORMER = Stage(
    "train_transformer", "train-transformer",
    inputs={"--split": paths.SPLIT_DIR, "--prepared": paths.PREPARED_DIR, "--pvqvae": paths.PVQVAE_CHECKPOINT},
    outputs={"--out": Output(paths.TRANSFORMER_CHECKPOINT),
             "--curves": Output(paths.TRANSFORMER_CURVES, directory=True, cache=False)},
    params=("variants.{variant}", "data", *TRAINING_MASKS, "{settings}transformer_train"), fan_out="variants",
    training=True, tracked=True)
REPLICATED = (TRAIN_PVQVAE, TRAIN_TRANSFORMER, SAMPLE, EVALUATE)
FRONTIER = Stage(
    "frontier", "frontier",
    inputs={"--checkpoint": paths.with_variant(paths.TRANSFORMER_CHECKPOINT, "put"),
            "--pvqvae": paths.with_variant(paths.PVQVAE_CHECKPOINT, "put"), "--masks": paths.MASKS_DIR},
    outputs={"--out": Output(paths.FRONTIER_DIR, directory=True, cache=False),
             "--samples": Output(paths.FRONTIER_SAMPLES, directory=True)},
    params=("frontier", "sample", "evaluate"), tracked=True)
# The same for the TPAMI 2024 model, so that the report draws both frontiers.
FRONTIER_TPAMI = replace(
    FRONTIER, name="frontier_tpami", variant=TPAMI_VARIANT, replica_of=FRONTIER.name,
    inputs={"--checkpoint": paths.with_variant(paths.TRANSFORMER_CHECKPOINT, TPAMI_VARIANT),
            "--pvqvae": paths.with_variant(paths.PVQVAE_CHECKPOINT, TPAMI_VARIANT), "--masks": paths.MASKS_DIR},
    outputs={"--out": Output(paths.FRONTIER_TPAMI_DIR, directory=True, cache=False),
             "--samples": Output(paths.FRONTIER_TPAMI_SAMPLES, directory=True)})

STAGES: tuple[Stage, ...] = (
    CONFIG,
    Stage("split", "split", inputs={},
          outputs={"--out": Output(paths.SPLIT_DIR, directory=True)},
          params=("data", "model.image_size")),
    Stage("prepare", "prepare", inputs={"--split": paths.SPLIT_DIR},
          outputs={"--out": Output(paths.PREPARED_DIR, directory=True)},
          params=("data", "model.image_size")),
    Stage("masks", "masks", inputs={"--split": paths.SPLIT_DIR},
          outputs={"--out": Output(paths.MASKS_DIR, directory=True)},
          params=("masks", "data", "model.image_size")),
    *REPLICATED,
    *(for_seeds(stage, variant) for stage in REPLICATED for variant in stage.variants),
    Stage("import_official", "import-official", inputs={"--transformer": OfficialFile("transformer")},
          outputs={"--out": Output(paths.with_official(paths.RUN_DIR), directory=True, declared=False),
                   "pvqvae": Output(paths.with_official(paths.PVQVAE_CHECKPOINT)),
                   "transformer": Output(paths.with_official(paths.TRANSFORMER_CHECKPOINT))},
          params=("official.{official}",), fan_out="official"),
    for_official(SAMPLE),
    for_official(EVALUATE),
    # Other methods on the same masks (params.yaml's `external`): their results as a samples folder, then the
    # variants' evaluation of it. The results folder is read through the entry's parameters (docs/external.md).
    Stage("external", "external", inputs={"--masks": paths.MASKS_DIR},
          outputs={"--out": Output(paths.with_external(paths.SAMPLES_DIR), directory=True)},
          params=("external.{external}", "sample.diversity_images"), fan_out="external", tracked=True),
    for_external(EVALUATE),
    FRONTIER,
    FRONTIER_TPAMI,
    Stage("bench", "bench-suite", inputs={},
          outputs={"--out": Output(paths.BENCH_DIR, directory=True, cache=False)},
          params=("model", "tpami_preset")),
    Stage("report", "report",
          inputs={"--metrics-dir": Evaluated(paths.METRICS_FILE),
                  "--samples": paths.with_variant(paths.SAMPLES_DIR, "put"),  # the sample grid shows PUT's
                  "--masks": paths.MASKS_DIR, "--benchmarks": paths.BENCH_DIR, "--frontier": paths.FRONTIER_DIR,
                  "--frontier-tpami": paths.FRONTIER_TPAMI_DIR,
                  "--resolved-params": paths.RESOLVED_PARAMS,
                  "--measured": paths.BENCHMARKS_DIR},  # committed GPU figures and cost.json (`put cost`)
          # The PDF goes to paths.REPORT_PDF, deliberately undeclared: see put/config/paths.py.
          outputs={"--out": Output(paths.REPORT_DIR, directory=True, cache=False)},
          params=("official", "external", "seeds", "sample.composite", "evaluate"), tracked=True, report=True),
)


@dataclass(frozen=True)
class Plot:
    """A `dvc plots` figure: one line per variant (`over`), from the same file of each variant's stage, one
    colour per series (put/dag/dvc_plots.py writes its Vega-Lite template). Axis titles say what is shown, in
    words, with the unit."""

    name: str
    title: str
    pattern: str
    x: str
    y: str
    x_label: str
    y_label: str
    over: FanOut = "variants"
    mark: Literal["line", "point"] = "line"
    series: str | None = None  # a Vega expression naming a row's series; None: the variant of its file
    series_title: str = "variant"
    log_x: bool = False
    # (column, label): a dashed rule at the first x where the column has a value, labelled: where a loss term that
    # is off at first starts (the step in a curve there is the new term, not a divergence)
    starts: tuple[tuple[str, str], ...] = ()

    def files(self) -> list[str]:
        if self.over == "none":
            return [self.pattern]
        variants = {"variants": VARIANTS, "pvqvae_variants": PVQVAE_VARIANTS}[self.over]
        return [paths.with_variant(self.pattern, v) for v in variants]


STEP = "training step (iterations)"
HOLE_RATIO = "hole ratio (fraction of the image masked; bin centre)"
CROSS_ENTROPY = "masked-token cross-entropy (nats per token)"
PLOTS: tuple[Plot, ...] = (
    Plot("pvqvae_loss", "P-VQVAE training loss", f"{paths.PVQVAE_CURVES}/{paths.TRAIN_CURVE}", "step", "total",
         STEP, "total generator loss (weighted sum, no unit)", over="pvqvae_variants",
         starts=(("adversarial", "delayed loss terms start"),)),
    Plot("pvqvae_psnr", "P-VQVAE held-out PSNR with reference pixels (dB)",
         f"{paths.PVQVAE_CURVES}/{paths.EVAL_CURVE}", "step", "psnr_with_reference", STEP,
         "PSNR of the reconstruction (dB)", over="pvqvae_variants"),
    Plot("transformer_loss", "UQ-Transformer masked-token cross-entropy (training)",
         f"{paths.TRANSFORMER_CURVES}/{paths.TRAIN_CURVE}", "step", "masked_token_loss", STEP, CROSS_ENTROPY),
    Plot("transformer_eval_loss", "UQ-Transformer masked-token cross-entropy (held out)",
         f"{paths.TRANSFORMER_CURVES}/{paths.EVAL_CURVE}", "step", "masked_token_loss", STEP, CROSS_ENTROPY),
    *(Plot(f"{metric}_vs_hole_ratio", f"{label} against the hole ratio (fine bins, top-K samples)",
           paths.METRICS_BINS, "hole_ratio", metric, HOLE_RATIO, label, series="datum.variant")
      for metric, label in (("psnr", "PSNR (dB)"), ("ssim", "SSIM (0 to 1, no unit)"),
                            ("mae", "MAE (mean absolute error, pixel values in 0 to 1)"))),
    Plot("frontier_psnr", "PSNR against transformer forward passes per image (the sampling frontier)",
         paths.FRONTIER_CSV, "forward_passes", "psnr", "transformer forward passes per image (log scale)",
         "PSNR (dB)", over="none", mark="point", log_x=True, series_title="sampling",
         series="datum.family + (toNumber(datum.top_k) > 0 ? ', K=' + toNumber(datum.top_k) : '')"),
)
METRICS: tuple[str, ...] = (paths.FRONTIER_METRICS,)  # `dvc metrics` files that lie inside a stage's output folder

# Snakemake targets (the first is the default). DVC builds every stage.
TARGETS: dict[str, tuple[str, ...]] = {
    "all": tuple(s.name for s in STAGES),
    # every variant (and seed replicate) trained, sampled and evaluated; its resolved parameters
    "ablations": ("config", "evaluate", *(f"evaluate_{variant}" for variant in EVALUATE.variants)),
}


def stage(name: str) -> Stage:
    for s in STAGES:
        if s.name == name:
            return s
    raise KeyError(f"no stage {name!r}; stages: {', '.join(s.name for s in STAGES)}")
