"""Faults a cluster produces (issue 20): a full disk, two runs on one output, a kill between the renames of a
folder swap, leftovers of killed runs, a checkpoint under another variant's name, hostile parameter files,
command-line mistakes. (A full disk during training: tests/test_training.py.)"""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import put.io.files
import put.io.output_lock
import put.models.checkpoint
from put.cli import main
from put.config.params import ParamsError, load_params, params_from_mapping
from put.dag.resources import ClusterConfigError, load_resource_table, load_site
from put.errors import LockedError
from put.io.diskspace import DiskFullError
from put.io.files import atomic_dir, atomic_write_text, recover_leftovers, temporary_name, this_host
from put.io.output_lock import UNLOCKED_ENV, OutputLock, lock_path
from put.io.yamlfile import YamlFileError, read_yaml
from put.models.checkpoint import atomic_torch_save, save_checkpoint
from put.official.convert import read_overrides
from tests.faults import FillingFile

ROOT = Path(__file__).resolve().parents[1]


def enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs: a real full disk (needs root and mount; skipped elsewhere, the injected tests always run)."""
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp-" in p.name or ".old-" in p.name)


# ---------------------------------------------------------------- a full disk

def test_a_checkpoint_on_a_full_tmpfs_is_named_with_the_bytes_and_the_old_file_is_kept(small_disk):
    target = small_disk / "model.pt"
    atomic_torch_save({"w": torch.zeros(10)}, target)
    before = target.read_bytes()
    with pytest.raises(DiskFullError) as err:
        atomic_torch_save({"w": torch.zeros(1 << 19)}, target)  # 2 MiB into 1 MiB
    message = str(err.value)
    assert message.startswith(f"{target}: no space left on device (needs about 2.0 MiB, ")
    assert f"nothing was lost: the existing {target} is as it was" in message and "\n" not in message
    assert target.read_bytes() == before and leftovers(small_disk) == []


def test_torch_s_unexpected_pos_is_translated_only_when_the_disk_is_full(tmp_path, monkeypatch):
    """torch's zip writer reports ENOSPC as RuntimeError("... unexpected pos ..."): recognised by the OSError in
    its context (injected here: a file that fills after 1000 bytes), not by catching every RuntimeError."""
    target = tmp_path / "model.pt"
    save_checkpoint(target, put.models.checkpoint.Checkpoint("pvqvae", {"model": {}}, {"w": torch.ones(3)}))
    before = target.read_bytes()
    monkeypatch.setattr(put.models.checkpoint, "open", FillingFile, raising=False)
    with pytest.raises(DiskFullError, match=re.escape(f"{target}: no space left on device (needs about 4.0 MiB")):
        save_checkpoint(target, put.models.checkpoint.Checkpoint("pvqvae", {"model": {}}, {"w": torch.ones(1 << 20)}))
    assert target.read_bytes() == before and leftovers(tmp_path) == []

    def broken(obj, f):  # the same writer error without a full disk behind it stays what it is
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")

    monkeypatch.setattr(put.models.checkpoint, "open", open, raising=False)
    monkeypatch.setattr(torch, "save", broken)
    with pytest.raises(RuntimeError, match="unexpected pos") as err:
        atomic_torch_save({"w": torch.ones(3)}, target)
    assert not isinstance(err.value, DiskFullError) and target.read_bytes() == before


def test_a_report_folder_on_a_full_tmpfs_keeps_the_previous_one(small_disk):
    out = small_disk / "report"
    with atomic_dir(out) as staging:
        (staging / "table1.tex").write_text("old")
    with pytest.raises(DiskFullError) as err:
        with atomic_dir(out) as staging:
            for i in range(8):
                (staging / f"figure{i}.png").write_bytes(os.urandom(200_000))
    assert str(err.value).startswith(f"{out}: no space left on device after writing ")
    assert "of the new folder beside the old one" in str(err.value)
    assert f"the existing {out} is as it was" in str(err.value)
    assert [p.name for p in out.iterdir()] == ["table1.tex"] and leftovers(small_disk) == []


def test_a_metrics_file_on_a_full_disk_names_its_size(small_disk, tmp_path, monkeypatch):
    text = json.dumps({"k50": {"40-60": {"psnr": 1.0}}}) * 40_000
    with pytest.raises(DiskFullError, match=re.escape(f"{small_disk / 'put.json'}: no space left on device "
                                                      "(needs about 1.3 MiB, 1.0 MiB free)")):
        atomic_write_text(small_disk / "put.json", text)
    assert leftovers(small_disk) == [] and not (small_disk / "put.json").exists()
    monkeypatch.setattr(Path, "write_bytes", enospc)  # the same, injected: runs everywhere
    with pytest.raises(DiskFullError, match=re.escape(f"{tmp_path / 'put.json'}: no space left on device (needs "
                                                      "about 1.3 MiB")):
        atomic_write_text(tmp_path / "put.json", text)
    assert leftovers(tmp_path) == []


def test_put_sample_on_a_full_disk_exits_2_with_one_line(tiny_checkpoints, eval_masks, tmp_path, monkeypatch,
                                                         capsys):
    import put.data.images

    _, _, transformer = tiny_checkpoints
    masks = eval_masks
    (tmp_path / "params.yaml").write_text("overrides: {sample: {diversity_samples: 2, diversity_images: 1}}\n")
    out = tmp_path / "samples"
    out.mkdir()
    (out / "samples.csv").write_text("earlier run\n")
    calls = []

    def fill_after_three(path, array):  # the fourth image finds the disk full
        calls.append(path)
        if len(calls) > 3:
            enospc()
        return real(path, array)

    real = put.data.images.write_png
    monkeypatch.setattr(put.data.images, "write_png", fill_after_three)
    monkeypatch.chdir(tmp_path)
    assert main(["sample", "--checkpoint", str(transformer), "--masks", str(masks), "--out", str(out),
                 "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"put sample: error: {out}: no space left on device after writing ")
    assert err.endswith(f"nothing was lost: the existing {out} is as it was. Free space, then re-run")
    assert [p.name for p in out.iterdir()] == ["samples.csv"] and leftovers(tmp_path) == []


# ---------------------------------------------------------------- one run per output

HOLDER = """
import sys, time
from pathlib import Path
import put.io.output_lock
with put.io.output_lock.sigterm_as_exit(), put.io.output_lock.OutputLock([Path(sys.argv[1])]):
    print("held", flush=True)
    time.sleep(120)
"""


def hold(output: Path) -> subprocess.Popen:
    """Another process holding the lock of `output`."""
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(output)], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert process.stdout.readline().strip() == "held"
    return process


def test_a_second_run_on_a_held_output_stops_at_once_naming_the_holder(tmp_path, capsys, monkeypatch):
    out = tmp_path / "resolved_params.yaml"
    monkeypatch.setenv("SLURM_JOB_ID", "4711")  # inherited by the holder
    holder = hold(out)
    try:
        record = json.loads(lock_path(out).read_text())
        assert record["command"] == f"put {out}" and record["slurm_job"] == "4711"  # sys.argv of `python -c`
        started = time.perf_counter()
        assert main(["config", "--out", str(out)]) == 2
        assert time.perf_counter() - started < 5
        err = capsys.readouterr().err.strip()
        assert err == (f"put config: error: {out}: in use by another run (host {record['host']}, pid {holder.pid}, "
                       f"started {record['started']}, Slurm job 4711: put {out}); stopping so that the two do not "
                       f"overwrite each other. A run's lock ends with its process; if its node died, delete "
                       f"{lock_path(out)}")
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    # Killed with SIGKILL, it could not release the lock: its file stays, but the kernel dropped the lock itself.
    assert lock_path(out).exists()
    monkeypatch.setattr(sys, "argv", ["put"])  # an identity shorter than the one left in the file
    with OutputLock([out]):
        assert json.loads(lock_path(out).read_text())["command"] == "put"
    assert main(["config", "--out", str(out)]) == 0
    assert out.is_file() and not lock_path(out).exists()


def test_training_on_a_held_output_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "pvqvae.pt"
    holder = hold(out)
    try:
        assert main(["train-pvqvae", "--split", str(tmp_path / "no_split"), "--out", str(out)]) == 2
        assert f"put train-pvqvae: error: {out}: in use by another run (host " in capsys.readouterr().err
    finally:
        holder.kill()
        holder.wait()


def test_the_lock_is_released_on_sigterm_and_on_errors(tmp_path, capsys):
    out = tmp_path / "out"
    holder = hold(out)
    holder.send_signal(signal.SIGTERM)
    assert holder.wait(timeout=30) == 128 + signal.SIGTERM
    assert not lock_path(out).exists()
    assert main(["config", "--params", str(tmp_path / "missing.yaml"), "--out", str(out)]) == 2
    assert "missing.yaml: parameter file not found" in capsys.readouterr().err and not lock_path(out).exists()


def test_a_second_lock_in_the_same_process_is_refused(tmp_path):
    """flock, not fcntl's POSIX locks: those belong to the process, which would get the same output twice (and
    lose both locks at the first close of the file)."""
    out = tmp_path / "out"
    with OutputLock([out]):
        with pytest.raises(LockedError, match=f"pid {os.getpid()}, "):
            OutputLock([out]).__enter__()
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid()  # reading it released nothing
        with pytest.raises(LockedError):
            OutputLock([out]).__enter__()
    assert not lock_path(out).exists()


HANDS_OVER = """
import os, sys
from pathlib import Path
import put.io.output_lock
put.io.output_lock.OutputLock([Path(sys.argv[1])]).__enter__().hand_over()
os.execv(sys.executable, [sys.executable, "-c", "import os, time; print(os.environ['PUT_OUTPUT_LOCKS_HELD'], "
                                                  "flush=True); time.sleep(120)"])
"""


def test_a_lock_handed_over_stays_held_across_exec(tmp_path):
    """What a launching command does (put/cli.py): the process it execs into, the launcher, holds the lock."""
    out = tmp_path / "out"
    launcher = subprocess.Popen([sys.executable, "-c", HANDS_OVER, str(out)], stdout=subprocess.PIPE, text=True,
                                env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        token = launcher.stdout.readline().strip()
        assert token and json.loads(lock_path(out).read_text())["token"] == token
        with pytest.raises(LockedError, match=f"pid {launcher.pid}, "):
            OutputLock([out]).__enter__()
    finally:
        launcher.kill()
        launcher.wait()
    with OutputLock([out]):  # gone with its process
        pass


RACER = """
import os, random, re, sys, time
from pathlib import Path
import put.errors
import put.io.output_lock
out, log, go, rounds = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), int(sys.argv[4])
fd, me = os.open(log, os.O_WRONLY | os.O_APPEND), os.getpid()
print("ready", flush=True)
while not go.exists():
    time.sleep(0.001)
for _ in range(rounds):
    try:
        with put.io.output_lock.OutputLock([out]):
            os.write(fd, f"enter {me}\\n".encode())
            time.sleep(random.random() * 0.002)
            os.write(fd, f"exit {me}\\n".encode())
    except put.errors.LockedError as err:
        holder = (re.search(r"pid (\\d+),", str(err)) or [None, "nobody"])[1]
        os.write(fd, f"refused {me} {holder}\\n".encode())
    time.sleep(random.random() * 0.001)
"""


def test_of_racing_runs_one_at_a_time_holds_the_output(tmp_path):
    """6 processes try 400 times each to take one output: each holder writes `enter` and `exit` to a shared log
    (O_APPEND: one line at a time, in order), so two holders at once show as an `enter` before the last `exit`.
    Every refusal names one of the racers as the holder."""
    out, log, go, racers, rounds = tmp_path / "out", tmp_path / "log", tmp_path / "go", 6, 400
    log.touch()
    started = time.monotonic()
    processes = [subprocess.Popen([sys.executable, "-c", RACER, str(out), str(log), str(go), str(rounds)],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
                 for _ in range(racers)]
    assert [p.stdout.readline().strip() for p in processes] == ["ready"] * racers
    go.touch()
    assert [p.wait(timeout=120) for p in processes] == [0] * racers
    pids, holder, wins, refusals = {str(p.pid) for p in processes}, None, 0, 0
    for number, line in enumerate(log.read_text().splitlines()):
        what, pid, *named = line.split()
        if what == "enter":
            assert holder is None, f"line {number}: {pid} entered while {holder} held the output"
            holder, wins = pid, wins + 1
        elif what == "exit":
            assert holder == pid, f"line {number}: {pid} left, but {holder} held the output"
            holder = None
        else:
            assert named[0] in pids - {pid}, f"line {number}: {pid} was refused by {named[0]}, not a racer"
            refusals += 1
    assert wins + refusals == racers * rounds and min(wins, refusals) >= 5 * racers  # they did meet
    print(f"{racers} processes x {rounds} rounds: {wins} held, {refusals} refused, "
          f"{time.monotonic() - started:.1f} s")
    assert not lock_path(out).exists()


def test_a_lock_file_removed_as_it_is_taken_is_let_go(tmp_path, monkeypatch):
    """The holder releases (removes the file, unlocks) between another run's open and its flock: that run has
    locked a removed file, and must lock the one at the path instead (the race of the test above, made sure)."""
    out = tmp_path / "out"
    first = OutputLock([out]).__enter__()
    flock = put.io.output_lock.fcntl.flock

    def first_releases_meanwhile(fd, operation):
        first.release()
        return flock(fd, operation)

    monkeypatch.setattr(put.io.output_lock.fcntl, "flock", first_releases_meanwhile)
    with OutputLock([out]):
        monkeypatch.undo()
        assert lock_path(out).exists()
        with pytest.raises(LockedError):
            OutputLock([out]).__enter__()


def test_a_lock_file_removed_by_hand_is_not_removed_again_by_its_holder(tmp_path):
    out = tmp_path / "out"
    first = OutputLock([out]).__enter__()
    lock_path(out).unlink()  # "if its node died, delete ..." said to a holder that lives
    with OutputLock([out]) as second:
        first.release()
        assert json.loads(lock_path(out).read_text())["pid"] == os.getpid() and second.held
        with pytest.raises(LockedError):
            OutputLock([out]).__enter__()
    assert not lock_path(out).exists()


@pytest.mark.parametrize("fs, options, local", [
    ("nfs", "vers=3,nolock,local_lock=all", "nfs mounted with local_lock=all,nolock"),
    ("nfs4", "vers=4.2,local_lock=none", None),
    ("lustre", "localflock", "lustre mounted with localflock"),
    ("lustre", "flock", None),
    ("fuse.sshfs", "user_id=0,group_id=0", "fuse.sshfs, a FUSE mount, whose locks the kernel keeps on this node"),
    ("fuse.s3fs", "user_id=0", "fuse.s3fs, a FUSE mount, whose locks the kernel keeps on this node")])
def test_locks_local_to_a_node_refuse_the_run_unless_told(tmp_path, monkeypatch, capsys, fs, options, local):
    shared = tmp_path / "shared dir"
    mounts = tmp_path / "mountinfo"
    escaped = str(shared).replace(" ", "\\040")
    mounts.write_text(f"1 0 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n"
                      f"2 1 0:50 / {escaped} rw,relatime shared:5 - {fs} server:/export rw,{options}\n")
    monkeypatch.setattr(put.io.output_lock, "MOUNTS", mounts)
    monkeypatch.delenv(UNLOCKED_ENV, raising=False)
    assert put.io.output_lock.node_local_locks(shared / "sub") == local
    assert put.io.output_lock.node_local_locks(tmp_path) is None
    out = shared / "out"
    assert main(["config", "--out", str(out)]) == (2 if local else 0)
    if local:
        (line,) = capsys.readouterr().err.splitlines()
        assert line == (f"put config: error: {out}: output locks do not work here (locks are local to this node: "
                        f"{local}), so a second run on this output, on another node, would not be kept out; put the "
                        "output on a file system whose locks every node shares (docs/reliability.md, \"Output "
                        f"locks\"), or set {UNLOCKED_ENV}=1 to run unguarded")
        assert not out.exists() and not lock_path(out).exists()
        monkeypatch.setenv(UNLOCKED_ENV, "1")
        assert main(["config", "--out", str(out)]) == 0 and out.is_file()
        assert (f"warning: {out}: not guarded (locks are local to this node: {local}; {UNLOCKED_ENV}=1): a run "
                "started meanwhile, here or on another node, would not be kept from this output"
                in capsys.readouterr().err)
        with OutputLock([out]), pytest.raises(LockedError):  # on this node, still one run at a time
            OutputLock([out]).__enter__()


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP], ids=["ENOLCK", "EOPNOTSUPP"])
def test_a_file_system_without_locks_refuses_the_run_unless_told(tmp_path, monkeypatch, capsys, code):
    def no_locks(fd, operation):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(put.io.output_lock.fcntl, "flock", no_locks)
    monkeypatch.delenv(UNLOCKED_ENV, raising=False)
    out = tmp_path / "out"
    assert main(["config", "--out", str(out)]) == 2 and not out.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"put config: error: {out}: output locks do not work here ({os.strerror(code)} for "
                           f"{lock_path(out)}), so a second run") and line.endswith(f"set {UNLOCKED_ENV}=1 to run "
                                                                                   "unguarded")
    monkeypatch.setenv(UNLOCKED_ENV, "1")
    elsewhere = tmp_path / ".out.tmp-gpu-07-1"  # another node's file being written: unlocked, it might be live
    elsewhere.write_text("")
    assert main(["config", "--out", str(out)]) == 0 and out.is_file() and elsewhere.exists()
    assert (f"warning: {out}: not guarded ({os.strerror(code)} for {lock_path(out)}; {UNLOCKED_ENV}=1)"
            in capsys.readouterr().err)


def test_locks_that_are_not_enforced_refuse_the_run(tmp_path, monkeypatch, capsys):
    """A file system that accepts flock and keeps nobody out (some FUSE mounts): the probe, a second open of the
    lock file, gets the lock too."""
    monkeypatch.setattr(put.io.output_lock.fcntl, "flock", lambda fd, operation: None)
    monkeypatch.delenv(UNLOCKED_ENV, raising=False)
    out = tmp_path / "out"
    assert main(["config", "--out", str(out)]) == 2 and not out.exists() and not lock_path(out).exists()
    assert (f"{out}: output locks do not work here (flock on {lock_path(out)} does not keep a second open of it "
            "out), so" in capsys.readouterr().err)


# ---------------------------------------------------------------- folder swaps and leftovers

def test_a_folder_is_swapped_in_one_step_where_linux_can(tmp_path, monkeypatch):
    if put.io.files.RENAMEAT2 is None:
        pytest.skip("no renameat2 in this C library")
    out = tmp_path / "out"
    out.mkdir()
    (out / "a").write_text("old")
    renamed = []
    real = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: renamed.append((a, b)) or real(a, b))
    with atomic_dir(out) as staging:
        (staging / "b").write_text("new")
    assert [p.name for p in out.iterdir()] == ["b"] and renamed == [] and os.listdir(tmp_path) == ["out"]


def read_folder(folder: Path) -> tuple | str:
    """The folder's files and contents as one reader sees them: the folder opened once, its files read from it."""
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return "missing"
    try:
        names = sorted(os.listdir(fd))
        contents = []
        for name in names:
            file = os.open(name, os.O_RDONLY, dir_fd=fd)
            contents.append(os.read(file, 100).decode())
            os.close(file)
        return tuple(zip(names, contents))
    except FileNotFoundError:  # an old version, deleted while being read
        return "deleted while read"
    finally:
        os.close(fd)


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two renames"])
def test_readers_see_the_old_folder_or_the_new_one_never_a_mix(tmp_path, monkeypatch, exchange):
    if not exchange:
        monkeypatch.setattr(put.io.files, "exchange", lambda a, b: False)
    out = tmp_path / "out"
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            seen.add(read_folder(out))

    with atomic_dir(out) as staging:
        for name in "abc":
            (staging / name).write_text("0")
    reader = threading.Thread(target=read)
    reader.start()
    for i in range(1, 150):
        with atomic_dir(out) as staging:
            for name in "abc":
                (staging / name).write_text(str(i))
    stop.set()
    reader.join()
    versions = [s for s in seen if isinstance(s, tuple)]
    assert [s for s in versions if len({content for _, content in s}) > 1] == [] and len(versions) > 1
    if exchange and put.io.files.RENAMEAT2 is not None:
        assert "missing" not in seen  # the output folder is there at every instant


KILLED_BETWEEN_RENAMES = """
import os, signal, sys
from pathlib import Path
import put.io.files
put.io.files.exchange = lambda a, b: False  # the two-rename swap of file systems without an exchange (NFS)
real = os.replace
def replace(a, b):
    real(a, b)
    if ".old-" in str(b):
        os.kill(os.getpid(), signal.SIGKILL)  # between the two renames
os.replace = replace
with put.io.files.atomic_dir(Path(sys.argv[1])) as staging:
    (staging / "result.txt").write_text("new")
"""


def test_a_kill_between_the_two_renames_is_repaired_by_the_next_run(tmp_path, capsys):
    out = tmp_path / "samples"
    out.mkdir()
    (out / "result.txt").write_text("old")
    killed = subprocess.run([sys.executable, "-c", KILLED_BETWEEN_RENAMES, str(out)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert killed.returncode == -signal.SIGKILL
    assert not out.exists()  # the instant the issue describes: old in .samples.old-PID, new in .samples.tmp-PID
    pid = f"{this_host()}-{killed_pid(tmp_path)}"
    assert leftovers(tmp_path) == [f".samples.old-{pid}", f".samples.tmp-{pid}"]
    with OutputLock([out]):  # what every `put` command does first with its output
        assert (out / "result.txt").read_text() == "old" and leftovers(tmp_path) == []
    err = capsys.readouterr().err
    assert f"recovered: {out}: put back the previous samples, which an interrupted run" in err


def killed_pid(folder: Path) -> int:
    return int(next(p.name for p in folder.iterdir() if ".old-" in p.name).rsplit("-", 1)[1])


def test_leftovers_of_killed_runs_go_and_those_of_live_ones_stay(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    here = this_host()
    out = tmp_path / "transformer.pt"
    out.write_bytes(b"good")
    (tmp_path / f".transformer.pt.tmp-{here}-{dead.pid}").write_bytes(b"half a checkpoint")
    (tmp_path / f".transformer.pt.tmp-{here}-{os.getpid()}").write_bytes(b"being written")
    (tmp_path / f".other.pt.tmp-{here}-{dead.pid}").write_bytes(b"another output's")
    folder = tmp_path / "samples"
    (tmp_path / f".samples.tmp-{here}-{dead.pid}" / "all").mkdir(parents=True)
    (folder / "all").mkdir(parents=True)
    (folder / "all" / f".x.png.tmp-{here}-{dead.pid}").write_bytes(b"half an image")
    done = recover_leftovers(out) + recover_leftovers(folder)
    assert len(done) == 3 and all("left by an interrupted run" in line for line in done)
    assert leftovers(tmp_path) == [f".other.pt.tmp-{here}-{dead.pid}", f".transformer.pt.tmp-{here}-{os.getpid()}"]
    assert list((folder / "all").iterdir()) == [] and out.read_bytes() == b"good"


def test_temporary_names_carry_the_host_and_another_host_s_are_never_removed(tmp_path, capsys):
    """A pid says whether a process lives only on its own host: another node's temporary output, of a run that
    may still be writing it (a node whose locks this one does not see), is kept and named, dead pid or live."""
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out = tmp_path / "samples"
    assert temporary_name(out) == tmp_path / f".samples.tmp-{this_host()}-{os.getpid()}"
    (out / "all").mkdir(parents=True)
    elsewhere = [tmp_path / f".samples.tmp-gpu-07.cluster-{dead.pid}", tmp_path / ".samples.old-gpu-07.cluster-1",
                 out / "all" / f".x.png.tmp-gpu-07.cluster-{dead.pid}"]
    for path in elsewhere:
        path.write_bytes(b"another node's")
    mine = tmp_path / f".samples.tmp-{this_host()}-{dead.pid}"
    mine.write_bytes(b"this host's, dead")
    with OutputLock([out]):  # locked or not (test_a_file_system_without_locks_...): the same
        assert all(path.exists() for path in elsewhere) and not mine.exists()
    err = capsys.readouterr().err
    assert f"recovered: {mine}: removed, left by an interrupted run (pid {dead.pid})" in err
    for path in elsewhere:
        assert f"{path}: kept, left by a run on host gpu-07.cluster (pid " in err


# ---------------------------------------------------------------- a checkpoint under another variant's name

def test_sample_and_frontier_refuse_a_checkpoint_of_another_variant(tiny_checkpoints, tmp_path, capsys):
    _, pvqvae, transformer = tiny_checkpoints  # recorded variant: put
    for command in (["sample"], ["frontier", "--masks", "m", "--samples", str(tmp_path / "fs")]):
        assert main([*command, "--variant", "conv", "--checkpoint", str(transformer),
                     "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
        assert capsys.readouterr().err.strip() == (
            f"put {command[0]}: error: {transformer}: is a checkpoint of variant 'put', but --variant conv needs "
            "variant 'conv'; pass that variant's checkpoint, or the variant this one was trained as")
        assert not (tmp_path / "out").exists()
    params = tmp_path / "params.yaml"
    params.write_text("official: {release: {transformer: t.pth, variant: conv}}\n")
    assert main(["sample", "--params", str(params), "--variant", "official_release", "--checkpoint",
                 str(transformer), "--out", str(tmp_path / "out"), "--device", "cpu"]) == 2
    assert "but --variant official_release needs variant 'conv'" in capsys.readouterr().err
    assert main(["train-transformer", "--variant", "one", "--pvqvae", str(pvqvae), "--out",
                 str(tmp_path / "t.pt")]) == 2
    assert f"{pvqvae}: is a checkpoint of variant 'put', but --variant one needs variant 'one'" in \
        capsys.readouterr().err


# ---------------------------------------------------------------- parameter files and the other YAML files

@pytest.mark.parametrize("content, message", [
    (b"preset: demo\noverrides: {}\npreset: ffhq\n", "line 3: key 'preset' given twice (first at line 1)"),
    (b"overrides:\n  sample:\n    top_k: 5\n    top_k: 6\n", "line 4: key 'top_k' given twice (first at line 3)"),
    (b"preset: demo\n# caf\xe9\n", "line 2: not UTF-8 (byte 0xe9 at column 6); save the file as UTF-8"),
    (b"", "the file is empty (expected parameters such as `preset: demo`; without a parameter file the defaults"),
    (b"# only a comment\n", "the file is empty"),
    (b"overrides: {transformer_train: {iterations: true}}\n",
     "overrides.transformer_train.iterations: expected a number, got a boolean (true/false) (got True)"),
    (b"overrides: {pvqvae_train: {betas: [false, 0.9]}}\n", "overrides.pvqvae_train.betas: expected a number, got a"),
    (b"preset: [\n", "line 2: not valid YAML"),
])
def test_bad_parameter_files_are_named_with_the_line(tmp_path, content, message, capsys):
    path = tmp_path / "params.yaml"
    path.write_bytes(content)
    with pytest.raises(ParamsError) as err:
        load_params(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    assert main(["config", "--params", str(path), "--out", str(tmp_path / "r.yaml")]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "r.yaml").exists()


def test_no_parameter_file_still_means_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["config", "--out", "r.yaml"]) == 0 and "preset: demo" in (tmp_path / "r.yaml").read_text()
    assert load_params(None).preset == "demo"
    assert params_from_mapping({"overrides": {"sample": {"composite": True}}}, "x").resolved().sample.composite


def test_a_key_merged_in_by_an_anchor_may_be_overridden_but_not_given_twice(tmp_path):
    """workflow/resources.yaml overrides rules of `<<: *paper` per preset: YAML's merge, not a duplicate."""
    path = tmp_path / "merge.yaml"
    path.write_text("a: &base {x: 1, y: 2}\nb:\n  <<: *base\n  y: 3\n")
    assert read_yaml(path, "a test") == {"a": {"x": 1, "y": 2}, "b": {"x": 1, "y": 3}}
    path.write_text("a: &base {x: 1}\nb:\n  <<: *base\n  y: 3\n  y: 4\n")
    with pytest.raises(YamlFileError, match=re.escape(f"{path}: line 5: key 'y' given twice (first at line 4)")):
        read_yaml(path, "a test")


def test_every_user_yaml_file_goes_through_the_same_reader(tmp_path):
    twice = tmp_path / "twice.yaml"
    twice.write_text("account: a\nqos: q\naccount: b\n")
    with pytest.raises(ClusterConfigError, match=re.escape(f"{twice}: line 3: key 'account' given twice")):
        load_site(twice)
    twice.write_text("defaults: {gpu: 0}\ndefaults: {gpu: 1}\n")
    with pytest.raises(ClusterConfigError, match=re.escape(f"{twice}: line 2: key 'defaults' given twice")):
        load_resource_table(twice)
    twice.write_text("pvqvae: {width: 8}\npvqvae: {width: 16}\n")
    with pytest.raises(YamlFileError, match=re.escape(f"{twice}: line 2: key 'pvqvae' given twice")):
        read_overrides(twice)
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"account: \xe9quipe\n")
    with pytest.raises(ClusterConfigError, match=re.escape(f"{latin}: line 1: not UTF-8")):
        load_site(latin)
    users = [p for p in (ROOT / "put").rglob("*.py") if "yaml.safe_load(" in p.read_text() or "yaml.load(" in
             p.read_text()]
    # put compare reads DVC's own dvc.lock (a machine-written file, from a git revision's bytes) for a result's masks
    # hash, and takes an unreadable one as no record: no user file
    assert sorted(str(p.relative_to(ROOT)) for p in users) == ["put/compare/results.py", "put/io/yamlfile.py"]
    assert "read_yaml_mapping(Path(workflow.basedir) / \"params.yaml\"" in (ROOT / "Snakefile").read_text()


# ---------------------------------------------------------------- the command line

@pytest.mark.parametrize("args, message", [
    (["sample"], "put sample: error: the following arguments are required: --checkpoint, --out"),
    (["nope"], "put: error: argument command: invalid choice: 'nope'"),
    (["info", "--variant", "x"], "put info: error: argument --variant: invalid choice: 'x'"),
    (["inpaint", "--checkpoint", "c", "--image", "i", "--mask", "m", "--out", "o", "--deterministic", "--samples",
      "8"], "put inpaint: error: --deterministic cannot be combined with --samples 8: argmax gives one result"),
    (["inpaint", "--checkpoint", "c", "--image", "i", "--mask", "m", "--out", "o", "--deterministic", "--top-k",
      "9"], "put inpaint: error: --deterministic cannot be combined with --top-k 9: argmax takes every token"),
    (["inpaint", "--checkpoint", "c", "--image", "i", "--mask", "m", "--out", "o", "--steps", "4",
      "--tokens-per-step", "2"], "put inpaint: error: --steps cannot be combined with --tokens-per-step 2"),
    (["train-pvqvae", "--out", "p.pt", "--gpus", "-2"], "put train-pvqvae: error: argument --gpus: expected 0 or a"),
])
def test_command_line_errors_are_one_line(args, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(args)
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.startswith(message) and err.count("\n") == 1 and "usage:" not in err


def test_help_is_unchanged(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["sample", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and out.startswith("usage: put sample [-h]") and "--checkpoint CHECKPOINT" in out
