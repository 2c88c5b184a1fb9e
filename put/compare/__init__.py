"""`put compare`: results of one preset (experiments, revisions, workspaces, variants) paired by test image and
mask, each against a baseline, with intervals and one family-wise correction (docs/statistics.md)."""
