"""Masks: file I/O with explicit polarity, generators, the frozen evaluation masks (bins: put/config/bins.py)."""
