"""The compositing rule whose files `put compare` reads (docs/external.md, "One rule per block"): main files under
`evaluate.known_pixels` (raw by default), Table 1 groups pasted in `pasted/`. PUT's raw output against results
that paste known pixels back would compare rules, not methods: such a comparison reads pasted files, or is refused."""

from __future__ import annotations

from collections.abc import Sequence
from typing import get_args

from put.config.evaluation import RANKED_RULE, KnownPixels, MixedRulesError
from put.config.external import EXTERNAL_PREFIX

RULES: tuple[str, ...] = get_args(KnownPixels)
ASKED = "--rule"
AS_TABLE1 = "PUT against another method: Table 1's rule"
MAIN = "its evaluate.known_pixels"  # the main files' rule


def outside(label: str) -> bool:
    """An evaluated label of another method's results (params.yaml's `external`), not of PUT or its variants."""
    return label.startswith(EXTERNAL_PREFIX)


def files_rule(labels: Sequence[tuple[str, str]], asked: str | None) -> tuple[str | None, str]:
    """The rule whose files every result (its name, its evaluated label) is read under and why: `asked`
    (--rule), or the pasted rule where PUT or a variant of it meets another method; None: each result's main
    files (their rules must agree). `--rule raw` for such a mixture is an error naming both sides."""
    others = [name for name, label in labels if outside(label)]
    own = [name for name, label in labels if not outside(label)]
    if others and own:
        if asked is not None and asked != RANKED_RULE:
            raise MixedRulesError(f"--rule {asked}: {', '.join(own)} (PUT's output as its decoder returns it) "
                                  f"against {', '.join(others)} (another method's results, the input's known "
                                  "pixels pasted back by the method itself) compares compositing rules, not "
                                  f"methods -- compare them under --rule {RANKED_RULE}, as Table 1 ranks them")
        return RANKED_RULE, ASKED if asked else AS_TABLE1
    return asked, ASKED if asked else MAIN


def check_rules(names: Sequence[str], rules: Sequence[str]) -> None:
    """Every result's main files scored under the baseline's rule, else an error naming the one that differs."""
    for name, rule in zip(names, rules):
        if rule != rules[0]:
            raise MixedRulesError(f"cannot pair {names[0]} and {name}: {name}: rule {rule} ({MAIN}) vs {names[0]}: "
                                  f"{rules[0]} -- compare under one rule: --rule {RANKED_RULE} reads the pasted "
                                  "files every evaluation writes beside its main ones")
