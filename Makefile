# Two commands on a fresh machine: `make demo` (the whole DAG on the embedded demo preset) and
# `make test` (the test suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
GPU_DIR ?= .gpu
LOCK := requirements.lock
PIP_TOOLS := pip-tools==7.6.2
# Python's bytecode cache stays on for everything make runs, whatever the caller's environment says: each of the
# DAG's stages and the tests' commands is a new process, which would compile the package again (1.5 s each).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install lock tex browser demo repro sync mlflow lint test test-slow test-slurm test-all dag vega exp record bench bench-loader bench-scale cost coverage gpu-prepare test-gpu measure-gpu \
	clean-venv tracking-server tracking-server-stop

install: $(STAMP)

# Exactly the pinned environment: every package at the version and hash of requirements.lock, then this project
# itself (editable, nothing else resolved). `make lock` regenerates the lock after a change to pyproject.toml.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet --require-hashes --no-deps -r $(LOCK)
	$(BIN)/python -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# requirements.lock from pyproject.toml's dependencies and extras, each package with the hashes of its published
# files (pip-compile, from pip-tools; 15 minutes from scratch, 1-2 when most pins stay). It keeps the current
# versions where pyproject.toml still allows them and resolves the rest; `make lock LOCK_FLAGS=--upgrade` moves
# everything to the newest versions allowed. Review the diff, then `make install`.
LOCK_FLAGS ?=
lock:
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet $(PIP_TOOLS)
	$(BIN)/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras --extra pipeline --extra dev \
	  --no-emit-index-url --no-emit-find-links $(LOCK_FLAGS) --output-file $(LOCK) pyproject.toml

# The whole DAG on the embedded demo preset (about 22 minutes on 2 CPU cores, docs/testing.md), then `make sync`.
demo: $(STAMP) tex
	@$(MAKE) --no-print-directory repro

# `dvc repro` of params.yaml's preset, then `make sync`; the closing lines say where everything is.
repro:
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro
	@$(MAKE) --no-print-directory sync
	@echo
	@echo "Done. Tables and figures: reports/demo/ (and reports/demo.pdf when pdflatex exists)."
	@echo "Metrics: results/demo/metrics/*.json (dvc metrics show)   Curves: dvc plots show   Checkpoints: runs/demo/"
	@$(BIN)/python -m put ui --link

# After `dvc repro`: Snakemake's record of every job (so that `snakemake -n` has nothing to do and
# `snakemake --report` finds each job's metadata), and MLflow's runs of the stages DVC skipped, logged from their
# outputs (`put track`). Both take seconds.
sync:
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/snakemake all --touch --forceall --cores 1 --quiet progress rules
	$(BIN)/python -m put track

# MLflow's UI on mlflow.db; it prints the link that opens the variants side by side (`put ui --port N` for another
# port).
mlflow: $(STAMP)
	$(BIN)/python -m put ui

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

# The linter, then the fast suite (2 to 4 minutes on 2 cores): a worker per core, up to 4 (pytest-xdist), each
# test file on one worker (its module's fixtures are set up once).
test: $(STAMP) lint tex browser
	$(BIN)/python -m pytest -q -m "not slow" -n auto --maxprocesses 4 --dist loadfile

# ruff (pyproject.toml): must be clean on the whole tree.
lint: $(STAMP)
	$(BIN)/ruff check .

# The slow suite: the whole demo DAG through DVC, the code-dependency test of both front ends, kill -9 resume. Two
# workers, each test file on one: the demo's tests (tests/test_dag.py) on one, the other files beside them (the
# repro's stages leave a core mostly idle: DVC, each stage's start).
test-slow: $(STAMP) tex browser
	$(BIN)/python -m pytest -q -m "slow" -n 2 --dist loadfile --durations=0

# Everything CI runs (.ci/run).
test-all: test test-slow test-slurm

# The ablation DAG through a live two-node Slurm cluster, logging to a tracking server on PostgreSQL (root on
# Debian: installs slurm-wlm, munge, slurmdbd, MariaDB and postgresql, starts them, runs tests/slurm, stops the
# daemons, the nodes' namespaces and both tracking servers by pid whatever the outcome).
SLURM_TRACKING_DIR ?= /tmp/put-slurm-tracking
# the time-limit test's own server, beside the suite's
SLURM_TIME_LIMIT_TRACKING_DIR = $(SLURM_TRACKING_DIR)/time-limit
stop-slurm-tracking = for dir in $(SLURM_TIME_LIMIT_TRACKING_DIR) $(SLURM_TRACKING_DIR); do \
	  PUT_TRACKING_DIR=$$dir workflow/tracking_server.sh stop; done
test-slurm: $(STAMP)
	tests/slurm/cluster.sh install
	workflow/tracking_server.sh install
	tests/slurm/cluster.sh down  # a cluster left over from an interrupted run
	$(stop-slurm-tracking)
	rm -rf $(SLURM_TRACKING_DIR) && mkdir -m 755 $(SLURM_TRACKING_DIR)
	tests/slurm/cluster.sh up && PUT_SLURM_TEST=1 PUT_SLURM_TRACKING_DIR=$(SLURM_TRACKING_DIR) \
	  PUT_SLURM_TIME_LIMIT_TRACKING_DIR=$(SLURM_TIME_LIMIT_TRACKING_DIR) timeout 5400 \
	  $(BIN)/python -m pytest -q -m slurm tests/slurm --durations=0; \
	  status=$$?; $(stop-slurm-tracking); tests/slurm/cluster.sh down; exit $$status

# An MLflow tracking server on PostgreSQL for cluster runs (workflow/tracking_server.sh; Debian's postgresql is
# installed when missing, as root): prints what jobs export (MLFLOW_TRACKING_URI, and its login). TRACKING_DIR holds
# the database, the artefacts and the admin's password (0600); TRACKING_HOST is the address it listens on
# (127.0.0.1: this machine only). Beyond loopback it has logins (docs/mlflow.md, "Logins"); TRACKING_AUTH=1 gives
# them on loopback too.
TRACKING_DIR ?= .mlflow-server
TRACKING_HOST ?= 127.0.0.1
TRACKING_AUTH ?=
tracking-server: $(STAMP)
	workflow/tracking_server.sh install
	PUT_TRACKING_DIR=$(TRACKING_DIR) PUT_TRACKING_HOST=$(TRACKING_HOST) PUT_TRACKING_AUTH=$(TRACKING_AUTH) \
	  MLFLOW=$(CURDIR)/$(BIN)/mlflow workflow/tracking_server.sh start

tracking-server-stop:
	PUT_TRACKING_DIR=$(TRACKING_DIR) workflow/tracking_server.sh stop

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
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc exp show --only-changed --drop '.*' \
	  --keep 'Experiment|Created|State|.*metrics/($(EXP_VARIANTS))\.json:k[0-9]+\.10-60\.(psnr|ssim)$$|^pvqvae_train\.lr_generator$$|^transformer_train\.lr$$'

# After a Snakemake (cluster) run: record its outputs in dvc.lock so `dvc repro` sees them as up to date.
record:
	$(BIN)/python workflow/dvc_record.py

# This machine's figures in reports/benchmarks/ (CPU: a few minutes on 2 cores; on a GPU see measure-gpu): the FFHQ
# transformer's sampling step and the P-VQVAE, the demo preset's sampling and training steps, one FID interval at
# n = 1,000 and the parts of each preset's evaluation, then `make cost`.
bench: $(STAMP)
	$(BIN)/put bench sampling --preset ffhq --steps 5 --out reports/benchmarks/sampling_ffhq_cpu.json
	$(BIN)/put bench pvqvae --preset ffhq --batch 4 --out reports/benchmarks/pvqvae_ffhq_cpu.json
	$(BIN)/put bench sampling --preset demo --steps 20 --batch 1 16 --engine eager graph \
	  --out reports/benchmarks/sampling_demo_cpu.json
	$(BIN)/put bench pvqvae --preset demo --batch 16 --out reports/benchmarks/pvqvae_demo_cpu.json
	$(BIN)/put bench train --preset demo --steps 10 --out reports/benchmarks/train_demo_cpu.json
	$(BIN)/put bench fid-interval --images 1000 --dim 2048 --resamples 1000 --out reports/benchmarks/fid_interval_cpu.json
	$(BIN)/put bench evaluate --preset demo ffhq places2 imagenet --out reports/benchmarks/evaluate_cpu.json
	$(BIN)/put bench sampling --preset ffhq_tpami256 ffhq_tpami512 --steps 5 --out reports/benchmarks/sampling_tpami_cpu.json
	$(BIN)/put bench pvqvae --preset ffhq_tpami256 ffhq_tpami512 --batch 4 --out reports/benchmarks/pvqvae_tpami_cpu.json
	$(BIN)/put bench sampling --preset demo_tpami --steps 3 --batch 1 16 --tokens-per-step 1 20 --engine eager graph \
	  --out reports/benchmarks/sampling_demo_tpami_cpu.json
	$(BIN)/put bench pvqvae --preset demo_tpami --batch 16 --out reports/benchmarks/pvqvae_demo_tpami_cpu.json
	$(BIN)/put bench train --preset demo_tpami --steps 10 --out reports/benchmarks/train_demo_tpami_cpu.json
	if [ -d $(GPU_DIR)/authors ]; then $(BIN)/python tools/gpu/authors_bench.py --official $(GPU_DIR)/authors \
	  --device cpu --batch 1 --masked 3 --repeats 1 --out reports/benchmarks/authors_sampling_cpu.json; \
	  else echo "the authors' loop not timed: no $(GPU_DIR)/authors (make gpu-prepare)"; fi
	$(MAKE) cost

# What each preset costs (reports/benchmarks/cost.json and the tables of docs/speed-and-cost.md) from the rows in
# reports/benchmarks/.
cost: $(STAMP)
	$(BIN)/put cost --page docs/speed-and-cost.md

# GPU work. On a machine with internet, once: wheels of what a bare GPU machine's Python 3.12 lacks (pydantic,
# pytest) and the authors' released code (AUTHORS_GIT: the .git folder of a clone of github.com/liuqk3/PUT),
# both into .gpu/ (ignored by git; carry it to the GPU machine). There: `make measure-gpu` (tools/gpu/measure.sh:
# every CUDA benchmark, the authors' loop, the cost tables, test-gpu), or `make test-gpu` alone.
AUTHORS_BRANCH ?= cvpr2022
gpu-prepare: $(STAMP)
	rm -rf $(GPU_DIR)/wheels && $(BIN)/pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
	  --platform manylinux2014_x86_64 -d $(GPU_DIR)/wheels pydantic pytest pytest-timeout
	@test -n "$(AUTHORS_GIT)" || { echo "AUTHORS_GIT=<.git folder of a clone of liuqk3/PUT> is needed"; exit 2; }
	rm -rf $(GPU_DIR)/authors && git --git-dir="$(AUTHORS_GIT)" ls-tree -r --name-only $(AUTHORS_BRANCH) \
	  | grep -E '\.(py|yaml)$$' | while read -r f; do mkdir -p "$(GPU_DIR)/authors/$$(dirname "$$f")" && \
	  git --git-dir="$(AUTHORS_GIT)" show "$(AUTHORS_BRANCH):$$f" > "$(GPU_DIR)/authors/$$f" || exit 1; done

# The CUDA correctness tests (tests/gpu; skipped without a GPU). No .venv needed: the machine's python3 with torch.
test-gpu:
	. tools/gpu/env.sh && "$$PY" -m pytest -q -m gpu tests/gpu -p no:cacheprovider

measure-gpu:
	tools/gpu/measure.sh

# How often the evaluation's intervals hold the truth, by simulation (docs/coverage.md and .csv; about 40 minutes on
# 2 cores: run it under the shared machine's lock).
coverage: $(STAMP)
	$(BIN)/put coverage --out docs/coverage.md

# Training samples per second and CPU core, from the prepared images and from the originals, per preset (the
# paper presets on generated images of their sizes; about 15 minutes in all). See docs/cluster.md, "Feeding the GPUs".
bench-loader: $(STAMP)
	for preset in demo ffhq places2 imagenet; do \
	  $(BIN)/put bench loader --preset $$preset --out reports/benchmarks/loader_$$preset.json || exit 1; done

# Every CPU-side stage of the DAG on fabricated data of growing size, with DVC, Snakemake and MLflow around them
# (reports/benchmarks/scale_cpu.json and the scale tables of docs/speed-and-cost.md; under nice, 30 CPU minutes and
# about 25 GB of disk for a while at the largest size; data under SCALE_WORK, deleted after; a stopped run resumes).
# See docs/speed-and-cost.md, "At the paper's data sizes".
SCALE_WORK ?= /tmp/put-scale
bench-scale: $(STAMP)
	nice -n 19 $(BIN)/put bench scale --sizes 1000 10000 100000 --test-images 100 300 1000 --work $(SCALE_WORK) \
	  --out reports/benchmarks/scale_cpu.json --page docs/speed-and-cost.md

clean-venv:
	rm -rf $(VENV)
