"""Between `torchrun` and the training processes it starts: which worker this is, a user error reported once
instead of once per worker, and the agent (`main`) that turns the workers' user errors and a rendezvous timeout
into one line and exit status 2 (docs/cluster.md, "Several GPUs and nodes per training job")."""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time

ERROR_FILE_ENV = "TORCHELASTIC_ERROR_FILE"  # torchrun gives every worker its own, and reads it when it fails
USER_ERROR_EXIT = 2  # the CLI's exit status for an error the user can act on (put/errors.py)
# What the agent's own stop of the other workers, after the first one failed, leaves: SIGTERM's death or
# the exit status our SIGTERM handlers give (put/io/output_lock.py, put/train/loop.py).
STOPPED_EXITS = {-signal.SIGTERM, 128 + signal.SIGTERM}


def launched_worker() -> bool:
    """Whether this process is one of torchrun's workers."""
    return "WORLD_SIZE" in os.environ


def worker_rank() -> int:
    """This process's global rank under torchrun; 0 outside it (one process, or the command before its launch)."""
    return int(os.environ.get("RANK", "0"))


def report_error(line: str) -> None:
    """A user error's one line. Under torchrun every worker writes it to its error file, which the agent reads
    (`main`), and only rank 0 prints it, into --log as well: one line where every worker met the same error."""
    path = os.environ.get(ERROR_FILE_ENV) if launched_worker() else None
    if not path or worker_rank() == 0:  # before the file: a rank 0 whose file the agent reads has printed
        print(line, file=sys.stderr, flush=True)
    if path:
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"message": line, "timestamp": int(time.time())}, f)
        except OSError:
            if worker_rank() != 0:
                print(line, file=sys.stderr)  # the agent cannot see it: the terminal must


def user_error_lines(failures: dict) -> list[str] | None:
    """The lines the agent prints for its failed workers ({global rank: torch's ProcessFailure}) when they stopped
    on a user error: every failure exited 2 or was stopped by the agent, and at least one exited 2. Rank 0
    printed its own line; each other line is printed once. None: not a user error (a crash, a bug)."""
    codes = {failure.exitcode for failure in failures.values()}
    if USER_ERROR_EXIT not in codes or not codes <= {USER_ERROR_EXIT, *STOPPED_EXITS}:
        return None
    # A worker stopped by the agent after it wrote its line counts as having said it: a worker that fails fast
    # (no torch imported yet) can be stopped by another's failure on its way out.
    said = {rank: failure.message for rank, failure in failures.items() if str(failure.message).startswith("put ")}
    lines = [message for rank, message in sorted(said.items()) if rank != 0 and message != said.get(0)]
    lines = list(dict.fromkeys(lines))  # each once, in rank order
    if not said:  # the worker that met the error is elsewhere (rank 0 on another node), or said nothing
        ranks = ", ".join(str(rank) for rank in sorted(failures))
        lines.append(f"put: error: worker(s) {ranks} exited {USER_ERROR_EXIT}: stopped on the error another worker "
                     "named (rank 0's output)")
    return lines


def quiet_agent(record: logging.LogRecord) -> bool:
    """Without the agent's lines on the first failure and its stop of the other workers: a user error is the
    workers' own line, a crash torchrun's report of every failed worker (ChildFailedError, below)."""
    return not str(record.msg).startswith(("failed (exitcode", "Sending process"))


def main() -> None:
    """`torchrun` whose parser matches its own options exactly (by default it takes an abbreviation out of the
    training command's arguments: our `--log` is ambiguous with its `--log-dir`, ...), and whose workers' user
    errors and rendezvous timeout are one line and exit 2 instead of a traceback per agent."""
    import torch.distributed.run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.elastic.rendezvous.api import RendezvousTimeoutError

    logging.getLogger("torch.distributed.elastic.multiprocessing.api").addFilter(quiet_agent)
    parser = torch.distributed.run.get_args_parser()
    parser.allow_abbrev = False
    args = parser.parse_args(sys.argv[1:])
    try:
        torch.distributed.run.run(args)
    except ChildFailedError as err:
        lines = user_error_lines(err.failures)
        if lines is None:
            raise
        for line in lines:
            print(line, file=sys.stderr)
        sys.exit(USER_ERROR_EXIT)
    except RendezvousTimeoutError:
        print(f"put: error: rendezvous {args.rdzv_endpoint} ({args.rdzv_id}): not every one of the {args.nnodes} "
              f"nodes joined within {args.rdzv_conf or 'the timeout'} (a node that never started, or that cannot "
              f"reach {args.rdzv_endpoint}); nothing was trained, a saved state is intact", file=sys.stderr)
        sys.exit(USER_ERROR_EXIT)
