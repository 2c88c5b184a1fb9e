"""`put` command line: a dispatcher over the subcommands of put/commands/ (one module each)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from collections.abc import Iterable
from contextlib import ExitStack, nullcontext
from pathlib import Path
from typing import NoReturn

from put.commands import COMMANDS
from put.errors import BUG_REPORT, PutError, describe
from put.io.diskspace import as_disk_full
from put.io.files import check_output, tee_output
from put.io.output_lock import HANDED_OVER_ENV, OutputLock, sigterm_as_exit
from put.tracking.login import login_refused
from put.train.launch import launch, needs_launch, processes_per_node, threads_per_process
from put.train.torchrun import launched_worker, report_error, worker_rank


def outputs_of(args: argparse.Namespace) -> list[Path]:
    """What the command writes: --out, and the options a command names in `other_outputs` (frontier's --samples)."""
    names = ("out", *getattr(args, "other_outputs", ()))
    return [Path(value) for name in names if (value := getattr(args, name, None)) is not None]


class CommandParser(argparse.ArgumentParser):
    """argparse with one-line errors: `put sample: error: ...` and where to look, not the usage block first."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (`{self.prog} --help` lists the options)\n")


def option_name(parser: argparse.ArgumentParser, dest: str) -> str:
    return next(a.option_strings[-1] for a in parser._actions if a.dest == dest and a.option_strings)


def refuse_conflicts(parser: argparse.ArgumentParser, args: argparse.Namespace,
                     conflicts: Iterable[tuple[str, tuple[str, ...], str]]) -> None:
    """A command's CONFLICTS: (option, the options it contradicts, why). Given means: differs from its default."""
    given = {dest for dest, value in vars(args).items() if value != parser.get_default(dest)}
    for option, others, why in conflicts:
        for other in others:
            if option in given and other in given:
                value = getattr(args, other)
                shown = option_name(parser, other) + ("" if isinstance(value, bool) else f" {value}")
                parser.error(f"{option_name(parser, option)} cannot be combined with {shown}: {why}")


def build_parser(only: str | None = None) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `put` parser and each subcommand's; with `only`, that subcommand's alone: a DAG stage imports its own
    command's module, not all 25 (some of which ask torch for a default device)."""
    parser = CommandParser(prog="put", description="PUT pluralistic image inpainting (CVPR 2022)")
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {}
    for name, module_name in COMMANDS.items():
        if only is not None and name != only:
            continue
        module = importlib.import_module(module_name)
        command = commands[name] = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(func=module.run, conflicts=getattr(module, "CONFLICTS", ()))
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    parser, commands = build_parser(words[0] if words and words[0] in COMMANDS else None)
    args = parser.parse_args(argv)
    refuse_conflicts(commands[args.command], args, args.conflicts)
    outputs = outputs_of(args)
    with ExitStack() as log, sigterm_as_exit():
        try:
            # Inside the handler: a bad --log path is one line. One writer: rank 0 (or the only process); the other
            # workers' lines reach the terminal (Slurm's log of the job).
            if getattr(args, "log", None) and worker_rank() == 0:
                log.enter_context(tee_output(args.log))
            if getattr(args, "out", None) is not None:  # before any work: a bad --out fails now, not hours later
                check_output(args.out, folder=args.out_folder)
            if needs_launch(getattr(args, "gpus", 0), getattr(args, "nodes", 1)):
                args.before_launch(args)  # a params.yaml typo: one line here, not one per worker
                # Another run on these outputs stops this one now; from here the launcher (this process, exec'd)
                # holds them for its workers until it ends: no window for a second run before rank 0 writes.
                log.enter_context(OutputLock(outputs)).hand_over()
                launch(args.nodes, processes_per_node(args.gpus), sys.argv[1:] if argv is None else argv)
            if threads := threads_per_process():
                import torch  # here, not at the top: `put config` (every DVC repro runs it) does not need it

                torch.set_num_threads(threads)
            handed_over = os.environ.get(HANDED_OVER_ENV) if launched_worker() else None  # by our own launcher
            with OutputLock(outputs, handed_over) if outputs and worker_rank() == 0 else nullcontext():
                args.func(args)
        except Exception as err:
            # User errors (PutError, a refused login, an untranslated full disk): one line, exit 2. Anything else is
            # a bug: its traceback, a line saying so, exit 1.
            known = err if isinstance(err, PutError) else login_refused(err) or as_disk_full(
                err, getattr(err, "filename", None) or (outputs or [Path.cwd()])[0])
            if known is not None:
                report_error(f"put {args.command}: error: {describe(known)}")
                return 2
            traceback.print_exc()
            print(f"put {args.command}: internal error ({type(err).__name__}): {BUG_REPORT}", file=sys.stderr)
            return 1
    return 0
