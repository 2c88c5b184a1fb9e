"""Import the authors' released PUT checkpoints (github.com/liuqk3/PUT, branch cvpr2022) as ours."""

from put.official.convert import ImportResult, import_official, read_overrides

__all__ = ["ImportResult", "import_official", "read_overrides"]
