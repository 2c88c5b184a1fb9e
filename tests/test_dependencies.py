"""pyproject.toml declares what the package imports: every third-party module under put/ (at any depth of its code)
belongs to a declared distribution with a lower bound that the installed version meets, in the core dependencies
when `put inpaint` imports it (the install without extras), else in an extra; and every declared distribution is
imported, or listed below with what uses it."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from functools import cache
from importlib.metadata import packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "put"
USED_WITHOUT_IMPORT = {  # declared, imported by no module of put/: what needs them
    "dvc": "the DAG (make demo) runs through its command line",
    "snakemake": "the cluster front end (Snakefile, workflow/)",
    "snakemake-executor-plugin-slurm": "Snakemake's Slurm executor",
    "nvidia-ml-py": "MLflow's GPU system metrics",
    "scikit-learn": "two of the demo photos are data files of its package (put/data/demo.py)",
    "jinja2": "pandas' Styler.to_latex (the report's tables)",
    "psycopg2-binary": "MLflow's PostgreSQL store (workflow/tracking_server.sh)",
    "flask-wtf": "MLflow's basic-auth app, the tracking server's logins (workflow/tracking_server.sh)",
    "dvc-ssh": "DVC's SSH remotes (docs/cluster.md: Sharing results)",
    "ruamel-yaml-clib": "DVC parses dvc.lock and dvc.yaml with it (ruamel.yaml falls back to pure Python without)",
}
TEST_ONLY = ("dev",)  # extras the package itself never imports


def declared() -> tuple[dict[str, Requirement], dict[str, Requirement]]:
    """(core, extras) requirements by canonical distribution name."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = {canonicalize_name(r.name): r for r in map(Requirement, project["dependencies"])}
    extras = {canonicalize_name(r.name): r for name, items in project["optional-dependencies"].items()
              if name not in TEST_ONLY for r in map(Requirement, items)}
    return core, extras


def third_party_imports() -> dict[str, set[str]]:
    """Top-level module -> the files of put/ that import it (the standard library and put itself left out)."""
    found: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top != "put":
                    found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


@cache
def installed() -> dict[str, list[str]]:
    return packages_distributions()  # reads every installed distribution's file list: seconds


def distributions(module: str) -> set[str]:
    found = installed().get(module)
    assert found, f"{module}: imported by the package, installed by no distribution"
    return {canonicalize_name(name) for name in found}


def test_every_import_is_declared_with_a_lower_bound_that_the_installed_version_meets():
    core, extras = declared()
    everything = {**extras, **core}
    for module, files in sorted(third_party_imports().items()):
        names = distributions(module) & set(everything)
        assert names, f"{module} (imported by {', '.join(sorted(files))}) is not declared in pyproject.toml"
        for name in names:
            requirement = everything[name]
            assert any(s.operator in (">=", ">", "~=", "==") for s in requirement.specifier), \
                f"{requirement}: no lower bound"
            assert requirement.specifier.contains(version(name), prereleases=True), \
                f"{name} {version(name)} installed, {requirement} declared"


def test_what_put_inpaint_imports_is_in_the_core_dependencies():
    """A plain `pip install put-inpainting` (no extras) runs `put inpaint`: what its path imports is core."""
    loaded = subprocess.run([sys.executable, "-c", "import sys, put.cli, put.sampling.inpaint, put.models.checkpoint; "
                             "put.cli.build_parser(); print(' '.join(sys.modules))"],
                            capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    core, _ = declared()
    top = {name.split(".")[0] for name in loaded}
    for module in sorted(set(third_party_imports()) & top):
        assert distributions(module) & set(core), f"{module}: imported by `put inpaint`, not a core dependency"


def test_every_declared_distribution_is_used():
    core, extras = declared()
    imported = {name for module in third_party_imports() for name in distributions(module)}
    unused = (set(core) | set(extras)) - imported - set(USED_WITHOUT_IMPORT)
    assert not unused, f"declared, never imported: {sorted(unused)}"
