"""Other inpainting methods on the frozen evaluation masks: results read from a folder, or classical methods
computed here (docs/external.md)."""
