"""The documentation holds together: README.md and docs/*.md link only to files (and headings) that exist, name
only `make` targets the Makefile has, and the README stays one screen's worth (at most README_MAX_LINES); the
pointers from the code into docs/ (`docs/statistics.md, "Intervals"`) name pages and headings that exist."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
README_MAX_LINES = 220

FENCE = re.compile(r"^ {0,3}(```|~~~).*?^ {0,3}\1[^\n]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"""<(?:a|img)\b[^>]*?\b(?:href|src)=["']([^"']+)["']""", re.I)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$", re.M)
POINTER = re.compile(r'docs/([\w.-]+\.md)(?:,\s+"([^"]+)")?')
POINTING = [*sorted((ROOT / "put").rglob("*.py")), ROOT / "Makefile", ROOT / "Snakefile",
            ROOT / "workflow" / "resources.yaml", *sorted((ROOT / "tools" / "gpu").glob("*"))]
MAKE = re.compile(r"(?<![\w./-])make[ \t]+([^\n`]*)")
TARGET = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def prose(text: str) -> str:
    """`text` without its fenced code blocks and inline code spans (links and headings there are not links)."""
    return CODE_SPAN.sub(" ", FENCE.sub("\n", text))


def code(text: str) -> list[str]:
    """The fenced code blocks and inline code spans of `text`."""
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    return blocks + [m.group(2) for m in CODE_SPAN.finditer(FENCE.sub("\n", text))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def headings(page: Path) -> list[str]:
    """The text of every heading of a Markdown page, markup dropped."""
    found = HEADING.finditer(FENCE.sub("\n", page.read_text()))
    return [re.sub(r"<[^>]+>", "", m.group(2)).replace("`", "") for m in found]


def broken_pointers(path: Path) -> list[str]:
    """The `docs/PAGE.md` and `docs/PAGE.md, "Heading"` pointers in `path` whose page, or heading, does not exist
    (a heading is named by its words, or by its first words: "Prepared images" for "Prepared images (the ...)")."""
    broken = []
    for match in POINTER.finditer(path.read_text()):
        page = ROOT / "docs" / match.group(1)
        named = " ".join(match.group(2).split()) if match.group(2) else None
        if not page.exists():
            broken.append(f"docs/{match.group(1)} (no such page)")
        elif named and not any(h == named or h.startswith(named + " ") for h in headings(page)):
            broken.append(f'docs/{match.group(1)}, "{named}" (no such heading)')
    return broken


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a Markdown page, the second and later of one slug numbered as GitHub does."""
    seen: dict[str, int] = {}
    found = set()
    for match in HEADING.finditer(FENCE.sub("\n", page.read_text())):
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(page: Path) -> list[str]:
    text = prose(page.read_text())
    return [m.group(1) for m in LINK.finditer(text)] + [m.group(1) for m in HTML_LINK.finditer(text)]


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def broken_links(page: Path) -> list[str]:
    """The relative links of `page` whose file, or whose #anchor in a Markdown file, does not exist."""
    broken = []
    for target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:: not checked here
            continue
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target} (no file {shown(file)})")
        elif anchor and file.suffix == ".md" and anchor not in anchors(file):
            broken.append(f"{target} (no heading #{anchor} in {shown(file)})")
    return broken


def makefile_targets() -> set[str]:
    targets = set()
    for line in (ROOT / "Makefile").read_text().splitlines():
        match = re.match(r"^([^\s#:=][^:=]*?)\s*::?(?!=)", line)
        if match and not line.startswith("\t"):
            targets.update(t for t in match.group(1).split() if TARGET.match(t))
    return targets


def make_targets_named(page: Path) -> set[str]:
    """The targets of every `make ...` command in the code of `page` (variables VAR=value skipped)."""
    named = set()
    for snippet in code(page.read_text()):
        for match in MAKE.finditer(snippet):
            for word in match.group(1).split():
                if "=" in word and not word.startswith("-"):
                    continue  # a variable: make exp EXP_VARIANTS=...
                if not TARGET.match(word):
                    break  # the end of the command: #, &&, ;, a quote
                named.add(word)
    return named


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert not broken_links(page), f"{page.relative_to(ROOT)}: broken links:\n" + "\n".join(broken_links(page))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_make_target_named_exists(page):
    missing = make_targets_named(page) - makefile_targets()
    assert not missing, f"{page.relative_to(ROOT)} names make targets the Makefile lacks: {sorted(missing)}"


def test_pointers_from_the_code_into_docs_resolve():
    broken = {str(path.relative_to(ROOT)): broken_pointers(path) for path in POINTING if path.is_file()}
    broken = {name: found for name, found in broken.items() if found}
    assert not broken, "pointers into docs/ that lead nowhere:\n" + "\n".join(
        f"{name}: {pointer}" for name, found in broken.items() for pointer in found)


def test_readme_is_one_screen():
    lines = len((ROOT / "README.md").read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; keep it to {README_MAX_LINES}, details in docs/"


def test_the_checks_catch_what_they_should(tmp_path):
    """The checkers themselves: a missing file, a missing heading and an unknown target are found; code is not
    taken for links; headings slug as GitHub's do."""
    (tmp_path / "other.md").write_text("# Speed and cost on GPUs\n## The TPAMI 2024 model (`main`)\n## Twice\n"
                                       "## Twice\n```\n# not a heading\n```\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#speed-and-cost-on-gpus) [ok](other.md#the-tpami-2024-model-main) "
                    "[ok](other.md#twice-1) ![ok](other.md) [ok](https://example.org/x) [ok](#here)\n"
                    "# Here\n[gone](missing.png) [gone](other.md#nowhere) [gone](other.md#not-a-heading)\n"
                    "`[not a link](nothing.md)`\n```bash\nmake demo   # comment\nmake lock LOCK_FLAGS=--upgrade\n```\n"
                    "`make record && dvc push`, `make nosuchtarget`, `STEPS=\"a b\" make measure-gpu`\n")
    assert broken_links(page) == ["missing.png (no file missing.png)", "other.md#nowhere (no heading #nowhere in "
                                  "other.md)", "other.md#not-a-heading (no heading #not-a-heading in other.md)"]
    assert make_targets_named(page) == {"demo", "lock", "record", "nosuchtarget", "measure-gpu"}
    (tmp_path / "module.py").write_text('"""A module (docs/statistics.md, "Intervals"); (docs/statistics.md, '
                                        '"FID\'s\ninterval"); docs/coverage.md; (docs/statistics.md, "No such"); '
                                        'docs/gone.md."""\n')
    assert broken_pointers(tmp_path / "module.py") == ['docs/statistics.md, "No such" (no such heading)',
                                                       "docs/gone.md (no such page)"]
    assert {"demo", "lock", "record", "measure-gpu", "test", "test-slow", "test-slurm"} <= makefile_targets()
    assert "nosuchtarget" not in makefile_targets()


def test_every_test_a_docs_page_names_exists():
    """A page that lists cases with their tests (docs/reliability.md's misuse cases, testing.md) names tests that
    exist: a renamed or removed test fails here, not silently in the docs."""
    defined = {m for path in (ROOT / "tests").rglob("test_*.py")
               for m in re.findall(r"^(?:async )?def (test_\w+)", path.read_text(), re.M)}
    named = {(page.name, m) for page in (ROOT / "docs").glob("*.md")
             for m in re.findall(r"(?:::|`)(test_\w+)\b(?!\.py)", page.read_text())}
    missing = sorted(f"{page}: {name}" for page, name in named if name not in defined)
    assert not missing, "tests named in the docs that do not exist:\n" + "\n".join(missing)
