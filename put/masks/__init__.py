"""Masks: file I/O with explicit polarity, generators, hole-ratio bins, the frozen evaluation masks."""
