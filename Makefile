# Two commands on a fresh machine: `make demo` (the whole DAG on the embedded demo preset) and
# `make test` (the test suite). Both create .venv on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test test-fast bench clean-venv

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[pipeline,dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

# Sampling speed of the paper's FFHQ transformer on this machine (see reports/benchmarks/).
bench: $(STAMP)
	$(BIN)/put bench sampling --preset ffhq --steps 5 --out reports/benchmarks/sampling_ffhq_cpu.json
	$(BIN)/put bench pvqvae --preset ffhq --batch 4 --out reports/benchmarks/pvqvae_ffhq_cpu.json

clean-venv:
	rm -rf $(VENV)
