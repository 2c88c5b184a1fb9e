"""Files on disk: atomic writes, output locks, disk space, YAML, pretrained weights, versions, the code's own files."""
