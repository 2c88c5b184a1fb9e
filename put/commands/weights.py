"""`put weights`: which pretrained files are present, and where each belongs."""

from __future__ import annotations

import argparse
import json
import sys

HELP = "which pretrained files are present or missing, and where each belongs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--download", action="store_true",
                        help="fetch every missing file into torch's hub cache, checking its published SHA-256")
    parser.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> list[dict]:
    from put.io.pretrained import PRETRAINED_FILES, DownloadError, download, weights_report

    if args.download:
        failed = []
        for file in PRETRAINED_FILES:
            if file.path.is_file():
                print(f"present  {file.path}")
                continue
            try:
                print(f"fetched  {download(file)}")
            except DownloadError as err:
                print(f"FAILED   {file.filename}: {err}", file=sys.stderr)
                failed.append(file.filename)
        if failed:
            raise DownloadError(f"{len(failed)} file(s) not fetched: {', '.join(failed)}")
    rows = weights_report()
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        for row in rows:
            state = "present" if row["present"] else "MISSING"
            print(f"{state:8} {row['name']:<28} {row['folder']}/{row['file']}\n         used by: {row['used_by']}"
                  + ("" if row["present"] else f"\n         get it from: {row['url']} (or: put weights --download)"))
    return rows
