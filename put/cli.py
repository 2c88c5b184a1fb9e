"""`put` command line: a dispatcher over the subcommands of put/commands/ (one module each)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Iterable
from contextlib import nullcontext
from pathlib import Path
from typing import NoReturn

import torch

from put.checkpoint import CheckpointError
from put.commands import COMMANDS
from put.diskspace import DiskFullError, as_disk_full
from put.errors import PutError
from put.fileio import check_output, tee_output
from put.outlock import OutputLock, OutputLocked, sigterm_as_exit
from put.pretrained import DownloadError
from put.train.launch import launch, threads_per_process

# Bad input, files or folders that are missing, of the wrong kind or not writable, an output another run holds,
# a full disk: exit status 2, one line.
USER_ERRORS: tuple[type[Exception], ...] = (ValueError, CheckpointError, FileNotFoundError, FileExistsError,
                                            NotADirectoryError, IsADirectoryError, PermissionError, DownloadError,
                                            OutputLocked, DiskFullError, PutError)


def describe(err: Exception) -> str:
    """The error for the user: an operating-system error as "PATH: reason", others as their message."""
    if isinstance(err, OSError) and not isinstance(err, DiskFullError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return str(err)


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


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """The `put` parser and each subcommand's."""
    parser = CommandParser(prog="put", description="PUT pluralistic image inpainting (CVPR 2022)")
    sub = parser.add_subparsers(dest="command", required=True)
    commands = {}
    for name, module_name in COMMANDS.items():
        module = importlib.import_module(module_name)
        command = commands[name] = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(func=module.run, conflicts=getattr(module, "CONFLICTS", ()))
    return parser, commands


def main(argv: list[str] | None = None) -> int:
    parser, commands = build_parser()
    args = parser.parse_args(argv)
    refuse_conflicts(commands[args.command], args, args.conflicts)
    outputs = outputs_of(args)
    with tee_output(args.log) if getattr(args, "log", None) else nullcontext(), sigterm_as_exit():
        try:
            if getattr(args, "out", None) is not None:  # before any work: a bad --out fails now, not hours later
                check_output(args.out, folder=args.out_folder)
            if getattr(args, "gpus", 0) * getattr(args, "nodes", 1) > 1 and "WORLD_SIZE" not in os.environ:
                with OutputLock(outputs):  # another run on these outputs stops this one now; rank 0 will hold them
                    pass
                launch(args.nodes, max(1, args.gpus), sys.argv[1:] if argv is None else argv)  # does not return
            if threads := threads_per_process():
                torch.set_num_threads(threads)
            with OutputLock(outputs) if outputs and os.environ.get("RANK", "0") == "0" else nullcontext():
                args.func(args)
        except USER_ERRORS as err:
            print(f"put {args.command}: error: {describe(err)}", file=sys.stderr)
            return 2
        except Exception as err:  # a full disk met by a write that did not translate it
            full = as_disk_full(err, getattr(err, "filename", None) or (outputs or [Path.cwd()])[0])
            if full is None:
                raise
            print(f"put {args.command}: error: {full}", file=sys.stderr)
            return 2
    return 0
