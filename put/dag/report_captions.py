"""What the report folder holds, file by file, as `snakemake --report` shows it: a category and a caption
(reStructuredText) per file, so the report reads as a document. The LaTeX document has its own captions (the
tables' are written by their builders and say more: measured on how many images, why a value is missing)."""

from __future__ import annotations

from pathlib import PurePath

CATEGORIES = {".html": "1. Tables", ".png": "2. Figures", ".csv": "3. Numbers", ".yaml": "4. Parameters",
              ".tex": "5. LaTeX sources"}
TOPICS = {
    "table1": "Table 1 of the paper: FID, PSNR, SSIM and MAE of PUT (deterministic and top-K sampling) on the "
              "20-40%, 40-60% and 10-60% hole ratios: PUT and every other method ranked with the known pixels pasted "
              "back for all, PUT's raw output (the paper's rule) apart, beside the paper's reported rows.",
    "table3": "Table 3 of the paper: the ablations (conv, one, no_ref, tok, qua0) beside the full model, "
              "top-K sampling (K = 50).",
    "speed": "Inference speed of the paper-size transformers and the P-VQVAE on this machine, beside the "
             "paper's RTX 3090 figures.",
    "speed_summary": "Sampling speed of the paper's three transformers at the paper's setting (batch 1, one token "
                     "per step): ours and the authors' loop per device, beside the paper's RTX 3090 figures.",
    "seeds": "Seed replicates: per variant, metric and mask group, the mean, standard deviation and interval over "
             "the training seeds, beside the mean image-bootstrap half-width (seed spread against test-image spread).",
    "differences": "Paired differences of every ablation (raw) and every other method (known pixels pasted back) from "
                   "PUT on the same test images, masks and sample draws: "
                   "the mean per-image difference, its bootstrap interval over the images' sources (and seed "
                   "replicates, where there are several: then Student's t with Satterthwaite's degrees of freedom), "
                   "its raw and family-adjusted p-values, and whether it survives the family's correction (Holm by "
                   "default).",
    "cost": "What each preset costs to train and sample: GPU-hours and wall time per stage and for the ablation DAG, "
            "from the measured training and sampling steps and the presets' schedules.",
    "cost_layouts": "The measured GPU layouts of the training stages: GPUs, batch per GPU, seconds per step, peak "
                    "memory, wall time and GPU-hours of one training job.",
    "cost_sampling": "Top-K sampling of the evaluation set's three Table 1 mask groups per variant on one device: ours "
                     "beside the authors' released loop.",
    "cost_evaluation": "The evaluate stage of one variant: per-image metrics, bootstrap intervals, Inception "
                       "features and LPIPS, counted from each preset and timed on the machines named.",
    "frontier": "The sampling frontier of the full model: quality and time against transformer forward passes "
                "per image (N tokens per step, cosine schedules, top-K).",
    "frontier_tpami": "The sampling frontier of the TPAMI 2024 model (the tpami variant), as the full model's.",
    "generations": "The CVPR 2022 and TPAMI 2024 models side by side on the same masks: FID, PSNR, SSIM and MAE "
                   "per mask group in both sampling modes, with intervals and a mark where their paired difference "
                   "excludes zero.",
    "generations_diversity": "Diversity of the CVPR 2022 and TPAMI 2024 models per hole-ratio bin (mean pairwise "
                             "LPIPS of an input's samples), with intervals.",
    "generations_frontier": "Both releases' sampling frontiers in one figure: quality against transformer forward "
                            "passes per image.",
    "curves_psnr_ssim_mae": "PSNR, SSIM and MAE against the hole ratio (fine bins), one line per variant.",
    "curve_fid": "FID against the hole ratio (top-K sampling, first sample per input), one line per variant.",
    "curve_lpips": "Diversity (mean pairwise LPIPS of an input's samples) against the hole ratio.",
    "samples_put": "PUT's samples: masked inputs (40-50% holes), top-K samples, ground truth.",
    "metrics": "Every measured value, one row per variant, sampling mode and mask group (tidy CSV); a value "
               "that could not be measured says why.",
    "curves": "The hole-ratio curves' values, one row per variant and fine bin (tidy CSV).",
    "resolved_params": "Every setting the run used, resolved from params.yaml and the preset.",
    "report": "The LaTeX document gathering the tables and figures (compiled to the PDF beside the folder "
              "when pdflatex exists).",
}
KINDS = {".html": "", ".png": "", ".csv": "", ".yaml": "", ".tex": "LaTeX source. "}


def caption(file: str) -> str:
    """The caption of a report file (`table1.html`); KeyError for a file this module does not know."""
    path = PurePath(file)
    return KINDS[path.suffix] + TOPICS[path.stem]


def category(file: str) -> str:
    return CATEGORIES[PurePath(file).suffix]


class Captions:
    """The captions, as the report rule's `params` hand them to workflow/report/caption.rst: `of(file)` fails
    loudly for a file without one, and the stable repr keeps Snakemake's params re-run trigger quiet."""

    def of(self, file: str) -> str:
        return caption(file)

    def __repr__(self) -> str:
        return "put.dag.report_captions.Captions()"
