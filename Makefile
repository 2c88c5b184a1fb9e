# Two commands on a fresh machine: `make demo` (the whole DAG on the embedded demo preset) and
# `make test` (the test suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install tex browser demo test test-slow test-slurm test-all dag record bench bench-loader clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[pipeline,dev]'
	touch $(STAMP)

# The whole DAG on the embedded demo preset (about 15 minutes on 2 CPU cores).
demo: $(STAMP) tex
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc repro
	@echo
	@echo "Done. Tables and figures: reports/demo/ (and reports/demo.pdf when pdflatex exists)."
	@echo "Metrics: results/demo/metrics/*.json (dvc metrics show)   Curves: dvc plots show   Checkpoints: runs/demo/"
	@echo "Compare runs: $(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db"

# pdflatex for the report test: Debian's TeX Live, installed when missing and apt-get is usable (root, as in CI).
tex:
	@command -v pdflatex >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      texlive-latex-base texlive-latex-recommended >/dev/null; \
	  else echo "note: pdflatex missing (install texlive-latex-base texlive-latex-recommended); its test is skipped"; fi; }

# Chromium for the tests that drive a page (Playwright, from the dev extras, launches /usr/bin/chromium; it downloads
# no browser): Debian's package, installed when missing and apt-get is usable (root, as in CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      chromium >/dev/null; \
	  else echo "note: chromium missing (install Debian's chromium); the browser tests are skipped"; fi; }

# The fast suite (about 10 minutes on 2 cores).
test: $(STAMP) tex browser
	$(BIN)/python -m pytest -q -m "not slow"

# The slow suite: the whole demo DAG through DVC, the code-dependency test of both front ends, kill -9 resume.
test-slow: $(STAMP) tex
	$(BIN)/python -m pytest -q -m "slow"

# Everything CI runs (.ci/run).
test-all: test test-slow test-slurm

# The ablation DAG through a live single-node Slurm cluster (root on Debian: installs slurm-wlm, munge,
# slurmdbd and MariaDB, starts them, runs tests/slurm, stops the daemons by pid whatever the outcome).
test-slurm: $(STAMP)
	tests/slurm/cluster.sh install
	tests/slurm/cluster.sh down  # a cluster left over from an interrupted run
	tests/slurm/cluster.sh up && PUT_SLURM_TEST=1 timeout 3600 $(BIN)/python -m pytest -q -m slurm tests/slurm; \
	  status=$$?; tests/slurm/cluster.sh down; exit $$status

# dvc.yaml from the DAG declaration (put/dag/declaration.py); a test fails when the committed file is stale.
dag: $(STAMP)
	$(BIN)/put dag

# After a Snakemake (cluster) run: record its outputs in dvc.lock so `dvc repro` sees them as up to date.
record:
	$(BIN)/python workflow/dvc_record.py

# Sampling speed of the paper's FFHQ transformer on this machine (see reports/benchmarks/).
bench: $(STAMP)
	$(BIN)/put bench sampling --preset ffhq --steps 5 --out reports/benchmarks/sampling_ffhq_cpu.json
	$(BIN)/put bench pvqvae --preset ffhq --batch 4 --out reports/benchmarks/pvqvae_ffhq_cpu.json

# Training samples per second and CPU core, from the prepared images and from the originals, per preset (the
# paper presets on generated images of their sizes; about 15 minutes in all). See README, "Feeding the GPUs".
bench-loader: $(STAMP)
	for preset in demo ffhq places2 imagenet; do \
	  $(BIN)/put bench loader --preset $$preset --out reports/benchmarks/loader_$$preset.json || exit 1; done

clean-venv:
	rm -rf $(VENV)
