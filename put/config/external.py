"""params.yaml's `external`: other inpainting methods scored on the frozen evaluation masks beside the variants,
either completed images another codebase wrote into a folder, or a classical method built in here
(docs/external.md)."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, model_validator

from put.config.model import StrictModel

EXTERNAL_PREFIX = "external_"  # an external entry NAME is evaluated under the label external_NAME
BUILTIN_METHODS: tuple[str, ...] = ("telea", "biharmonic")  # put/external/builtin.py
# The layouts `put masks-export` writes and an entry's folder can follow (put/masks/layouts.py names their files).
ExportFormat = Literal["lama", "folder", "ict"]
EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
SAMPLE_INFIX = "_s"  # several results per input: <result file stem>_s<k>.png, k = 0, 1, ...


class ExternalMethod(StrictModel):
    """One method of Table 1 measured on our masks: its results' folder or a built-in method, and how the tables
    name it."""

    label: str = Field(min_length=1, description="the method's name in the tables, e.g. LaMa")
    citation: str = Field(min_length=1, description="where it is published, printed beside the label")
    method: Literal["telea", "biharmonic"] | None = Field(None, description="a built-in classical method")
    folder: str | None = Field(None, description="completed images, named as `put masks-export`'s result_file")
    format: ExportFormat = Field("lama", description="the export layout the folder's names follow "
                                 "(put/masks/layouts.py)")
    samples: int = Field(1, ge=1, description="results per input: 1 (deterministic, the table's deterministic "
                         "block) or k > 1 (named by put/masks/layouts.py's sample_file: the K block and the "
                         "diversity score)")

    @model_validator(mode="after")
    def _one_source(self) -> ExternalMethod:
        if (self.method is None) == (self.folder is None):
            raise ValueError("give exactly one of `folder` (completed images) and `method` (one of "
                             f"{', '.join(BUILTIN_METHODS)})")
        if self.method is not None and self.samples != 1:
            raise ValueError(f"the built-in method {self.method!r} is deterministic: samples must be 1")
        return self

    @property
    def stochastic(self) -> bool:
        return self.samples > 1

    def how_run(self) -> str:
        """A sentence for Table 1's caption: what produced the results."""
        if self.method is not None:
            return f"built in here ({BUILTIN_DESCRIPTIONS[self.method]}), deterministic."
        return (f"its results read from {self.folder} ({self.samples} per input, named as put masks-export's "
                f"{self.format} layout).")


BUILTIN_DESCRIPTIONS = {
    "telea": "OpenCV cv2.inpaint, INPAINT_TELEA, radius 3",
    "biharmonic": "scikit-image restoration.inpaint_biharmonic per colour channel",
}
