"""Pretrained files the pipeline can use, where each one belongs (torch's hub cache), and `download`.

Nothing is downloaded silently or replaced by random weights: a missing file is an error naming the file, the
folder and its address, until `put weights --download` fetches it.
"""

from __future__ import annotations

import hashlib
import http.client
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import torch
from torch.hub import HASH_REGEX
from tqdm import tqdm

from put.errors import MissingFileError, ServiceError
from put.io.files import atomic_path

DOWNLOAD_COMMAND = "put weights --download"


class MissingWeightsError(MissingFileError):
    pass


class DownloadError(ServiceError):
    """A file could not be fetched (no network, HTTP error) or did not match its published hash."""


@dataclass(frozen=True)
class PretrainedFile:
    name: str
    filename: str
    url: str
    used_by: str

    @property
    def path(self) -> Path:
        return hub_checkpoints_dir() / self.filename

    @property
    def sha256_prefix(self) -> str:
        """The hash its publisher put in the file name: torch.hub's `<name>-<first hex digits of the SHA-256>.<ext>`
        convention, which torch.hub itself checks with check_hash=True."""
        found = HASH_REGEX.search(self.filename)
        if not found or len(found.group(1)) < 8:
            raise ValueError(f"{self.filename}: no SHA-256 prefix in the file name")
        return found.group(1)

    def missing(self) -> str | None:
        """None when the file is in place, else why not (for an 'unavailable' metric; no machine path in it)."""
        if self.path.is_file():
            return None
        return f"{self.name} weights ({self.filename}) are not in torch's hub cache; `{DOWNLOAD_COMMAND}` fetches them"

    def require(self) -> Path:
        if not self.path.is_file():
            raise MissingWeightsError(
                f"{self.name} weights ({self.used_by}) not found: put {self.filename} into "
                f"{self.path.parent}/ (`{DOWNLOAD_COMMAND}` fetches it from {self.url}; the folder follows "
                "$TORCH_HOME)")
        return self.path


def hub_checkpoints_dir() -> Path:
    """$TORCH_HOME/hub/checkpoints (torch.hub.get_dir honours TORCH_HOME)."""
    return Path(torch.hub.get_dir()) / "checkpoints"


VGG19 = PretrainedFile(
    "VGG19", "vgg19-dcbb9e9d.pth", "https://download.pytorch.org/models/vgg19-dcbb9e9d.pth",
    "P-VQVAE perceptual and style losses")

# torch-fidelity's FID Inception, at the path its own hub download would use; put.metrics.fid passes it
# explicitly. The name carries the SHA-256 prefix (torch.hub's convention), which `download` checks.
INCEPTION_FID = PretrainedFile(
    "Inception-v3 (FID)", "weights-inception-2015-12-05-6726825d.pth",
    "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/"
    "weights-inception-2015-12-05-6726825d.pth",
    "FID (torch-fidelity)")

# LPIPS backbones (torchvision's, from the hub cache); LPIPS's linear layers ship with the package, so only these
# can be missing.
LPIPS_VGG16 = PretrainedFile(
    "VGG16 (LPIPS backbone)", "vgg16-397923af.pth",
    "https://download.pytorch.org/models/vgg16-397923af.pth",
    "diversity LPIPS, net='vgg'")
LPIPS_ALEXNET = PretrainedFile(
    "AlexNet (LPIPS backbone)", "alexnet-owt-7be5be79.pth",
    "https://download.pytorch.org/models/alexnet-owt-7be5be79.pth",
    "diversity LPIPS, net='alex'")

LPIPS_BACKBONES: dict[str, PretrainedFile] = {"vgg": LPIPS_VGG16, "alex": LPIPS_ALEXNET}

PRETRAINED_FILES: tuple[PretrainedFile, ...] = (VGG19, INCEPTION_FID, LPIPS_VGG16, LPIPS_ALEXNET)


def weights_report() -> list[dict]:
    """One row per pretrained file: where it belongs and whether it is there (for `put weights`)."""
    return [
        {"name": f.name, "file": f.filename, "folder": str(f.path.parent), "present": f.path.is_file(),
         "used_by": f.used_by, "url": f.url}
        for f in PRETRAINED_FILES
    ]


def download(file: PretrainedFile, timeout: float = 60, progress: bool = True) -> Path:
    """Fetch `file` into the hub cache: streamed to a temporary name beside it with a progress bar, its
    SHA-256 checked against the published prefix, and only then renamed into place, so an interrupted or
    corrupt download never leaves a file that looks like the real one."""
    digest = hashlib.sha256()
    try:
        with urllib.request.urlopen(file.url, timeout=timeout) as response, atomic_path(file.path) as tmp:
            size = int(response.headers.get("Content-Length") or 0) or None
            with open(tmp, "wb") as out, tqdm(total=size, unit="B", unit_scale=True, desc=file.filename,
                                              disable=not progress) as bar:
                while chunk := response.read(1 << 20):
                    out.write(chunk)
                    digest.update(chunk)
                    bar.update(len(chunk))
            if not digest.hexdigest().startswith(file.sha256_prefix):
                raise DownloadError(
                    f"{file.url}: SHA-256 {digest.hexdigest()} does not start with the published "
                    f"{file.sha256_prefix}; the download was discarded (corrupt transfer or a changed file)")
    except urllib.error.HTTPError as err:
        raise DownloadError(f"{file.url}: HTTP {err.code} {err.reason}") from None
    except http.client.HTTPException as err:
        raise DownloadError(f"{file.url}: transfer interrupted ({err!r}); nothing was kept") from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as err:
        reason = getattr(err, "reason", err)
        raise DownloadError(
            f"cannot reach {file.url} ({reason}): no network? On a machine with internet run "
            f"`{DOWNLOAD_COMMAND}` and copy {file.filename} into {file.path.parent}/") from None
    return file.path
