"""Training of both stages: a shared resumable loop (loop.py) and one task per stage."""
