"""`put serve`: inpaint in the browser with every model under a runs folder (a local web app)."""

from __future__ import annotations

import argparse

from put.commands.common import default_device, device_name, positive_int
from put.errors import InputError

HELP = "inpaint in the browser: draw a hole, see N results, compare variants (a local web app)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", default="runs", help="folder searched (at any depth) for <name>/transformer.pt, "
                                                       "e.g. runs/demo; imported official weights included")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default: this machine only; 0.0.0.0 opens it to the network)")
    parser.add_argument("--port", type=int, default=8765, help="port (0: any free one, printed at start)")
    parser.add_argument("--device", type=device_name, default=default_device())
    parser.add_argument("--max-upload-mb", type=float, default=32, help="larger uploads are refused")
    parser.add_argument("--max-samples", type=positive_int, default=64, help="most samples per request")
    parser.add_argument("--max-queued", type=positive_int, default=16, help="most requests waiting per model")


def run(args: argparse.Namespace) -> None:
    import socket
    from pathlib import Path

    import uvicorn

    from put.serve.app import Limits, create_app
    from put.serve.catalog import find_models, find_test_images
    from put.serve.jobs import Runner

    models = find_models(Path(args.runs))
    test_images = find_test_images({entry.preset for entry in models.values()})
    runner = Runner(args.device, args.max_queued)
    app = create_app(models, test_images, runner, args.host, Limits(int(args.max_upload_mb * 2**20), args.max_samples))
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
    print(f"put serve: http://{shown}:{port}/ on {args.device} (Ctrl+C stops)", flush=True)
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        runner.shutdown()
