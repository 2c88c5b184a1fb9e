"""Records in dvc.lock the outputs a Snakemake run made (on a cluster, say), so that `dvc status` and
`dvc repro` see those stages as up to date instead of running them again:

    python workflow/dvc_record.py          (`make record`)

It commits every stage of dvc.yaml whose dependencies and outputs all exist (`dvc commit --force` on them) and names
the stages left out. Dependencies and parameters are hashed as they are now: run it right after the
cluster run, before editing params.yaml or the code. DVC rewrites committed files when it moves them
into its cache; their timestamps are put back, so Snakemake, which compares them, does not re-run
anything either."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dvc.repo import Repo, lock_repo


def file_times(paths: list[Path]) -> dict[Path, tuple[int, int]]:
    files = [q for p in paths for q in ([p] if p.is_file() else p.rglob("*")) if q.is_file()]
    return {f: (f.stat().st_atime_ns, f.stat().st_mtime_ns) for f in files}


def commit(stages: list) -> None:
    """`dvc commit --force` of `stages` (what dvc/repo/commit.py does for each target), with each dvc.lock written
    once for all of them: a write parses and rewrites the whole file, which took half a minute per stage."""
    by_file: dict[str, tuple] = {}
    for stage in stages:
        stage.save()
        stage.commit(relink=True)
        by_file.setdefault(stage.dvcfile.path, (stage.dvcfile, []))[1].append(stage)
    for dvcfile, group in by_file.values():
        dvcfile.dump_stages(group, update_pipeline=False)


def main() -> int:
    with Repo(".") as repo, lock_repo(repo):
        stages = list(repo.index.stages)
        complete = [stage for stage in stages if all(path.exists for path in [*stage.deps, *stage.outs])]
        missing = [stage.addressing for stage in stages if stage not in complete]
        if not complete:
            print("dvc_record: no stage has all its outputs; nothing recorded", file=sys.stderr)
            return 1
        times = file_times([Path(out.fs_path) for stage in complete for out in stage.outs])
        try:
            commit(complete)
        finally:
            for path, ns in times.items():
                if path.exists():
                    os.utime(path, ns=ns)
    print(f"recorded {len(complete)} stage(s) in dvc.lock: {', '.join(s.addressing for s in complete)}")
    if missing:
        print(f"not recorded (inputs or outputs missing): {', '.join(missing)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
