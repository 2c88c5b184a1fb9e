"""`put serve`: inpaint in the browser with every model under a runs folder (a local web app)."""

from __future__ import annotations

import argparse

from put.commands.common import add_precision_argument, default_device, device_name, positive_float, positive_int
from put.errors import InputError
from put.serve.limits import Limits, MiB

HELP = "inpaint in the browser: draw a hole, see N results, compare variants (a local web app)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", help="folder searched (at any depth) for <name>/transformer.pt, e.g. runs/demo; "
                                       "imported official weights included (default: runs, unless --model is given)")
    parser.add_argument("--model", action="append", metavar="CHECKPOINT",
                        help="serve this model too (repeatable): a transformer checkpoint's path, or a registered "
                             "model models:/NAME@ALIAS or models:/NAME/VERSION in the MLflow store of "
                             "MLFLOW_TRACKING_URI, else ./mlflow.db")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: this machine only; 0.0.0.0 opens it to the network, "
                             "with a token)")
    parser.add_argument("--token", help="the token every request must carry (default: one generated at start, "
                                        "printed in the link, unless --host is 127.0.0.1 or localhost)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free one, printed at start)")
    parser.add_argument("--device", type=device_name, default=default_device())
    add_precision_argument(parser)
    limits = Limits()
    parser.add_argument("--max-upload-mb", type=float, default=limits.max_upload_bytes / MiB,
                        help="larger uploads are refused (bytes as sent)")
    parser.add_argument("--max-pixels", type=positive_int, default=limits.max_pixels,
                        help="images of more pixels (width x height) are refused from their header, before decoding")
    parser.add_argument("--max-job-pixels", type=positive_int, default=limits.max_job_pixels,
                        help="most image pixels x samples one request asks of one model")
    parser.add_argument("--max-job-attention", type=positive_int, default=limits.max_job_attention,
                        help="most samples x tokens² one request asks of one model (attention's cost)")
    parser.add_argument("--max-job-seconds", type=positive_float, default=limits.job_seconds,
                        help="a request still sampling after this long is stopped, failed (timed out)")
    parser.add_argument("--upload-timeout", type=positive_float, default=limits.upload_seconds,
                        help="seconds an upload's body may take to arrive (then 408)")
    parser.add_argument("--max-models", type=positive_int, default=limits.max_loaded,
                        help="models kept loaded; the least recently used is unloaded beyond this")
    parser.add_argument("--max-running", type=positive_int, default=limits.max_running,
                        help="requests sampled at once, all models together")
    parser.add_argument("--max-samples", type=positive_int, default=limits.max_samples,
                        help="most samples per request")
    parser.add_argument("--max-queued", type=positive_int, default=limits.max_queued,
                        help="most requests waiting per model")
    parser.add_argument("--max-store-mb", type=float, default=limits.store_bytes / MiB,
                        help="uploads kept in memory (decoded), the oldest forgotten first")
    parser.add_argument("--max-results-mb", type=float, default=limits.results_bytes / MiB,
                        help="finished results kept in memory (PNG), the oldest forgotten first")


def run(args: argparse.Namespace) -> None:
    import socket
    import tempfile
    from pathlib import Path

    import uvicorn

    from put.serve.app import create_app
    from put.serve.auth import resolve_token
    from put.serve.catalog import find_models, find_test_images, named_entry
    from put.serve.jobs import Runner

    limits = Limits(max_upload_bytes=int(args.max_upload_mb * MiB), max_pixels=args.max_pixels,
                    max_job_pixels=args.max_job_pixels, max_job_attention=args.max_job_attention,
                    job_seconds=args.max_job_seconds, upload_seconds=args.upload_timeout,
                    max_loaded=args.max_models, max_running=args.max_running, max_samples=args.max_samples,
                    max_queued=args.max_queued, store_bytes=int(args.max_store_mb * MiB),
                    results_bytes=int(args.max_results_mb * MiB))
    token = resolve_token(args.host, args.token)
    fetched = tempfile.TemporaryDirectory(prefix="put-serve-models-")  # registered models' files, while it serves
    runs = args.runs if args.runs is not None or args.model else "runs"
    models = find_models(Path(runs)) if runs is not None else {}
    for reference in args.model or ():
        entry = named_entry(reference, Path(fetched.name))
        models[entry.id] = entry
    test_images = find_test_images({entry.preset for entry in models.values()})
    runner = Runner(args.device, limits, precision=args.precision)
    app = create_app(models, test_images, runner, args.host, limits, token)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(128)  # connections wait in the backlog until the server accepts them: the URL works once printed
    except OSError as err:
        raise InputError(f"--host {args.host} --port {args.port}: cannot listen there ({err.strerror})") from None
    port = sock.getsockname()[1]
    for entry in models.values():
        print(f"model {entry.label}" + (f"  [unusable: {entry.problem}]" if entry.problem else ""), flush=True)
    shown = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    link = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    print(f"put serve: {link} on {args.device} (Ctrl+C stops)", flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        runner.shutdown()
        fetched.cleanup()
