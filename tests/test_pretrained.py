"""`put weights --download` against a local HTTP server: a good file lands in the hub cache, a corrupt one is
rejected without leaving anything behind, and an unreachable host is a clear 'no network' error."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from put.cli import main
from put.io import pretrained
from put.io.pretrained import DownloadError, PretrainedFile, download

PAYLOAD = b"not really weights, but bytes with a known hash\n" * 1000


@pytest.fixture
def server(tmp_path):
    """127.0.0.1 serving tmp_path/www: good-<real prefix>.pth and bad-<wrong prefix>.pth (same bytes)."""
    www = tmp_path / "www"
    www.mkdir()
    prefix = hashlib.sha256(PAYLOAD).hexdigest()[:8]
    wrong = format((int(prefix, 16) + 1) % 16 ** 8, "08x")
    (www / f"good-{prefix}.pth").write_bytes(PAYLOAD)
    (www / f"bad-{wrong}.pth").write_bytes(PAYLOAD)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(www))
    handler.log_message = lambda *a: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", prefix, wrong
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    return tmp_path / "torch_home" / "hub" / "checkpoints"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_good_file_is_fetched_into_the_hub_cache(server, cache):
    url, prefix, _ = server
    file = PretrainedFile("Good", f"good-{prefix}.pth", f"{url}/good-{prefix}.pth", "a test")
    assert file.missing() and "put weights --download" in file.missing()
    assert download(file, progress=False) == cache / file.filename
    assert file.path.read_bytes() == PAYLOAD and file.missing() is None
    assert leftovers(cache) == [file.filename]


def test_corrupt_file_is_rejected_and_nothing_is_left(server, cache):
    url, prefix, wrong = server
    file = PretrainedFile("Bad", f"bad-{wrong}.pth", f"{url}/bad-{wrong}.pth", "a test")
    with pytest.raises(DownloadError, match=f"does not start with the published {wrong}"):
        download(file, progress=False)
    assert leftovers(cache) == []


def test_http_error_and_no_network_are_clear(server, cache):
    url, _, _ = server
    absent = PretrainedFile("Absent", "absent-12345678.pth", f"{url}/absent-12345678.pth", "a test")
    with pytest.raises(DownloadError, match="HTTP 404"):
        download(absent, progress=False)
    offline = PretrainedFile("Offline", "x-12345678.pth", "http://put-weights.invalid/x-12345678.pth", "a test")
    with pytest.raises(DownloadError, match=r"no network\?.*x-12345678\.pth into"):
        download(offline, progress=False)
    assert leftovers(cache) == []


def test_cli_download_fetches_the_missing_files_and_reports_failures(server, cache, monkeypatch, capsys):
    url, prefix, wrong = server
    good = PretrainedFile("Good", f"good-{prefix}.pth", f"{url}/good-{prefix}.pth", "a test")
    bad = PretrainedFile("Bad", f"bad-{wrong}.pth", f"{url}/bad-{wrong}.pth", "a test")
    monkeypatch.setattr(pretrained, "PRETRAINED_FILES", (good, bad))
    assert main(["weights", "--download"]) == 2
    err = capsys.readouterr().err
    assert f"bad-{wrong}.pth" in err and "1 file(s) not fetched" in err
    assert leftovers(cache) == [good.filename]
    monkeypatch.setattr(pretrained, "PRETRAINED_FILES", (good,))
    assert main(["weights", "--download"]) == 0  # already present: nothing fetched again
    assert "present" in capsys.readouterr().out


def test_every_listed_file_has_a_published_hash_prefix():
    for file in pretrained.PRETRAINED_FILES:
        assert len(file.sha256_prefix) == 8 and file.url.endswith(file.filename)
    with pytest.raises(ValueError, match="no SHA-256 prefix"):
        _ = PretrainedFile("x", "nohash.pth", "http://x/nohash.pth", "x").sha256_prefix
