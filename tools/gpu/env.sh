# Sourced by tools/gpu/measure.sh and `make test-gpu`: the Python to run and the packages it lacks.
# A GPU machine may have torch but not this project's other packages (the team's H100 had no pydantic, pytest):
# wheels fetched beforehand by `make gpu-prepare` (.gpu/wheels) are installed into .gpu/site, never into the
# system, and only for what does not import. Sets PY (the project's .venv if there is one, else python3) and
# PYTHONPATH (the repository first, then .gpu/site).
GPU_DIR=${GPU_DIR:-.gpu}
if [ -x .venv/bin/python ]; then PY=${PY:-.venv/bin/python}; else PY=${PY:-python3}; fi
missing=$("$PY" - <<'PYEOF'
import importlib.util
print(" ".join(m for m in ("pydantic", "pytest", "pytest_timeout", "yaml", "pandas", "tqdm", "PIL")
                if importlib.util.find_spec(m) is None))
PYEOF
)
if [ -n "$missing" ]; then
  if ls "$GPU_DIR"/wheels/*.whl >/dev/null 2>&1; then
    echo "installing wheels from $GPU_DIR/wheels into $GPU_DIR/site (missing: $missing)" >&2
    "$PY" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$GPU_DIR/site" "$GPU_DIR"/wheels/*.whl
  else
    echo "missing Python packages: $missing; run \`make gpu-prepare\` on a machine with internet and bring $GPU_DIR" >&2
  fi
fi
export PYTHONPATH="$PWD${GPU_DIR:+:$PWD/$GPU_DIR/site}${PYTHONPATH:+:$PYTHONPATH}"
export PY
