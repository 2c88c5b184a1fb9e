# Two commands on a fresh machine: `make demo` (the whole DAG on the embedded demo preset) and
# `make test` (the test suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install tex browser demo test test-slow test-slurm test-all dag vega exp record bench clean-venv

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

# Debian's chromium for the tests that look at pages in a real browser (Playwright drives it: no browser
# download), installed when missing and apt-get is usable (root, as in CI); elsewhere those tests are skipped.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	      chromium >/dev/null; \
	  else echo "note: chromium missing (Debian: apt-get install chromium); the browser tests are skipped"; fi; }

# The fast suite (about 10 minutes on 2 cores).
test: $(STAMP) tex
	$(BIN)/python -m pytest -q -m "not slow"

# The slow suite: the whole demo DAG through DVC, the code-dependency test of both front ends, kill -9 resume.
test-slow: $(STAMP) tex browser
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

# dvc.yaml and the dvc plots templates from the DAG declaration (put/dag/declaration.py); a test fails when
# a committed file is stale.
dag: $(STAMP)
	$(BIN)/put dag

# Re-vendor Vega, Vega-Lite and vega-embed (pinned, integrity-checked npm packages) into the offline page of
# `dvc plots show` (.dvc/plots_page.html); needs npm.
vega:
	$(PYTHON) workflow/vendor_vega.py

# The experiments table with the columns that matter: the PSNR and SSIM of Table 1's 10-60% cell (top-K
# sampling) of the variants in EXP_VARIANTS (a regular expression; each column is ~45 characters wide), the
# learning rates, and every setting an experiment changed (it fits a 200-column terminal).
EXP_VARIANTS ?= put
exp: $(STAMP)
	PATH="$(CURDIR)/$(BIN):$$PATH" $(BIN)/dvc exp show --only-changed --drop '.*' \
	  --keep 'Experiment|Created|State|.*metrics/($(EXP_VARIANTS))\.json:k[0-9]+\.10-60\.(psnr|ssim)$$|^pvqvae_train\.lr_generator$$|^transformer_train\.lr$$'

# After a Snakemake (cluster) run: record its outputs in dvc.lock so `dvc repro` sees them as up to date.
record:
	$(BIN)/python workflow/dvc_record.py

# Sampling speed of the paper's FFHQ transformer on this machine (see reports/benchmarks/).
bench: $(STAMP)
	$(BIN)/put bench sampling --preset ffhq --steps 5 --out reports/benchmarks/sampling_ffhq_cpu.json
	$(BIN)/put bench pvqvae --preset ffhq --batch 4 --out reports/benchmarks/pvqvae_ffhq_cpu.json

clean-venv:
	rm -rf $(VENV)
