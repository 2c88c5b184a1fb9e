"""Vendors Vega, Vega-Lite and vega-embed into the page that `dvc plots show` fills (`make vega`).

DVC's default page loads the three scripts from a CDN, so it is blank offline (a cluster's login node). This
script fetches the pinned npm packages with `npm pack`, checks each tarball against its pinned SHA-512
(npm's `dist.integrity`), and writes .dvc/plots_page.html with their minified builds inline, each under a
comment naming the package, version and licence (BSD-3-Clause, University of Washington Interactive Data Lab;
the text is workflow/vega/LICENSE). The page has no `{scripts}` placeholder, so DVC adds no CDN tags; .dvc/config
names it (`plots.html_template`), so a plain `dvc plots show` uses it.

Bundled inside the builds, as published: vega.min.js carries d3 modules and topojson-client (ISC); vega-embed
carries fast-json-patch and json-stringify-pretty-compact (MIT), semver (ISC), vega-themes, vega-tooltip and
vega-schema-url-parser (BSD-3-Clause)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / ".dvc" / "plots_page.html"  # `plots.html_template` in .dvc/config (relative to .dvc/)
PACKAGES = {  # name: (version, build file, npm dist.integrity)
    "vega": ("5.33.1", "build/vega.min.js",
             "sha512-1fArfVDUqVbb5z8n+/nVQb+VNBzx8svY6CrsyTK4Ujm4yrd9I1auoKxBAPXLCavY1LcrbHUskQbGUP8gXOzyQw=="),
    "vega-lite": ("5.23.0", "build/vega-lite.min.js",
                  "sha512-l4J6+AWE3DIjvovEoHl2LdtCUkfm4zs8Xxx7INwZEAv+XVb6kR6vIN1gt3t2gN2gs/y4DYTs/RPoTeYAuEg6mA=="),
    "vega-embed": ("6.29.0", "build/vega-embed.min.js",
                   "sha512-PmlshTLtLFLgWtF/b23T1OwX53AugJ9RZ3qPE2c01VFAbgt3/GSNI/etzA/GzdrkceXFma+FDHNXUppKuM0U6Q=="),
}
# DVC's page (dvc_render.html.PAGE_HTML) without {scripts}: the placeholders DVC fills are {refresh_tag} and
# {plot_divs}.
HEAD = """<!DOCTYPE html>
<html>
<head>
    {refresh_tag}
    <meta charset="utf-8">
    <title>DVC plots</title>
    <style>
        body { font-family: sans-serif; }
        table { border-spacing: 15px; }
    </style>
"""
TAIL = """</head>
<body>
    {plot_divs}
</body>
</html>
"""


def fetch(name: str, version: str, build: str, integrity: str, folder: Path) -> str:
    tarball = subprocess.run(["npm", "pack", "--silent", f"{name}@{version}"], cwd=folder, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
    digest = "sha512-" + base64.b64encode(hashlib.sha512((folder / tarball).read_bytes()).digest()).decode()
    if digest != integrity:
        raise SystemExit(f"{name}@{version}: integrity {digest} != pinned {integrity}")
    with tarfile.open(folder / tarball) as archive:
        script = archive.extractfile(f"package/{build}").read().decode()
    for forbidden in ("</script", "{scripts}", "{plot_divs}", "{refresh_tag}"):
        if forbidden in script:
            raise SystemExit(f"{name}: its build contains {forbidden!r}, which would break the inline page")
    return script


def main() -> None:
    parts = [HEAD]
    with tempfile.TemporaryDirectory() as tmp:
        for name, (version, build, integrity) in PACKAGES.items():
            script = fetch(name, version, build, integrity, Path(tmp))
            parts.append(f"    <!-- {name} {version} ({build}, npm), BSD-3-Clause, (c) University of Washington "
                         f"Interactive Data Lab: see workflow/vega/LICENSE -->\n    <script>{script}</script>\n")
    parts.append(TAIL)
    PAGE.write_text("".join(parts))
    print(f"{PAGE} written ({PAGE.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
