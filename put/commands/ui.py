"""`put ui`: MLflow's UI on this project's runs, after printing the link that opens them (the experiment's training
runs, in the saved view of the variants side by side: MLflow otherwise opens on its GenAI overview)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from put.commands.common import add_params_arguments, load_cli_params

HELP = "start MLflow's UI on the local runs (mlflow.db) and print the link that opens the variants side by side"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from put.tracking.names import UI_HOST, UI_PORT

    add_params_arguments(parser)
    parser.add_argument("--host", default=UI_HOST, help=f"address to listen on (default {UI_HOST}: this machine only)")
    parser.add_argument("--port", type=int, default=UI_PORT, help=f"port (default {UI_PORT})")
    parser.add_argument("--link", action="store_true", help="print the link only; start nothing")


def run(args: argparse.Namespace) -> None:
    from put.tracking.lookup import experiment_link
    from put.tracking.source import tracking_uri

    preset = load_cli_params(args).preset
    uri = tracking_uri()
    if uri.startswith(("http://", "https://")):  # a tracking server serves its own UI
        print(f"MLflow runs on the tracking server {uri}: open {experiment_link(preset) or uri}", flush=True)
        return
    shown = "localhost" if args.host in ("0.0.0.0", "::") else args.host
    link = experiment_link(preset, f"http://{shown}:{args.port}")
    if args.link:
        print(f"MLflow, the variants side by side: `make mlflow` (MLflow's UI), then open {link}" if link else
              f"MLflow: no runs of preset {preset!r} in {uri} yet")
        return
    print(f"open {link}" if link else f"no runs of preset {preset!r} in {uri} yet (run `make demo` or `dvc repro`)",
          flush=True)
    mlflow = str(Path(sys.executable).with_name("mlflow"))
    os.execv(mlflow, [mlflow, "ui", "--backend-store-uri", uri, "--host", args.host, "--port", str(args.port),
                      "--workers", "1"])
