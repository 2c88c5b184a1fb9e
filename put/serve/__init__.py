"""`put serve`: a local web app to inpaint in the browser with the trained variants (docs/serving.md, "Inpainting
in the browser"). catalog: the models and test images the page may choose, by id; limits: what the server accepts
and keeps; store: uploads read by the CLI's readers, within a byte budget; jobs: one request at a time per model,
with progress; app: the page and its JSON API."""
