"""The one reader of every user-written YAML file: UTF-8, safe loading, errors naming file and line. A key given
twice is an error (PyYAML silently keeps the last)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from put.errors import InputError, MissingFileError


class YamlFileError(InputError):
    pass


class _DuplicateKey(yaml.constructor.ConstructorError):
    pass


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a mapping holding the same key twice, naming both lines."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        # Only literal duplicates count: a key merged in by `<<: *anchor` may be overridden on purpose, so the
        # check runs before the merge keys are flattened into the mapping.
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark.line)
            except TypeError:  # an unhashable key: SafeLoader's own error names it
                break
            if first != key_node.start_mark.line:
                raise _DuplicateKey(None, None, f"key {key!r} given twice (first at line {first + 1})",
                                    key_node.start_mark)
        self.flatten_mapping(node)
        return super().construct_mapping(node, deep)


def _decode(path: str | os.PathLike, raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[:err.start].count(b"\n") + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise YamlFileError(f"{path}: line {line}: not UTF-8 (byte 0x{raw[err.start]:02x} at column {column}); "
                            "save the file as UTF-8") from None


def read_yaml(path: str | os.PathLike, expected: str) -> Any:
    """The file's content (None when it holds no document: empty, or only comments). A missing file, bytes that
    are not UTF-8, invalid YAML and duplicated keys are errors naming the file, the line and `expected`."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path}: file not found (expected {expected})")
    return parse_yaml(path.read_bytes(), path, expected)


def parse_yaml(raw: bytes, where: str | os.PathLike, expected: str) -> Any:
    """`read_yaml` of a file's bytes read elsewhere (a git revision's copy); `where` names it in the errors."""
    text = _decode(where, raw)
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f"line {mark.line + 1}: " if mark is not None else ""
        what = err.problem if isinstance(err, _DuplicateKey) else f"not valid YAML: {err.problem or err.context}"
        raise YamlFileError(f"{where}: {line}{what} (expected {expected})") from None
    except yaml.YAMLError as err:
        raise YamlFileError(f"{where}: not valid YAML: {err} (expected {expected})") from None


def read_yaml_mapping(path: str | os.PathLike, expected: str, empty_ok: bool = False) -> dict:
    """A YAML file whose top level is a mapping. An empty file is an error unless `empty_ok` (then {})."""
    return _mapping(read_yaml(path, expected), path, expected, empty_ok)


def parse_yaml_mapping(raw: bytes, where: str | os.PathLike, expected: str, empty_ok: bool = False) -> dict:
    """`read_yaml_mapping` of a file's bytes read elsewhere (a git revision's copy); `where` names it."""
    return _mapping(parse_yaml(raw, where, expected), where, expected, empty_ok)


def _mapping(data: Any, where: str | os.PathLike, expected: str, empty_ok: bool) -> dict:
    if data is None and not empty_ok:
        raise YamlFileError(f"{where}: the file is empty (expected {expected})")
    if data is not None and not isinstance(data, dict):
        raise YamlFileError(f"{where}: expected a mapping ({expected}) at the top level, got {type(data).__name__}")
    return data or {}
