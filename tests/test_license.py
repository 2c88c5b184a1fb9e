"""The LICENSE file is the license pyproject.toml declares, and CITATION.cff cites the paper README names."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_license_file_matches_the_declared_license_and_citation_names_the_paper():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["license"]
    assert (ROOT / "LICENSE").read_text().splitlines()[0] == f"{declared} License"
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0" and citation["license"] == declared
    paper = citation["preferred-citation"]
    assert f'"{paper["title"]}", Liu et al., CVPR {paper["year"]}' in " ".join((ROOT / "README.md").read_text().split())
    assert paper["authors"][0] == {"family-names": "Liu", "given-names": "Qiankun"}
