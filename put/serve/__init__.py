"""`put serve`: a local web app to inpaint in the browser with the trained variants (docs/serving.md, "Inpainting
in the browser"). catalog: the models and test images the page may choose, by id; limits: what the server accepts
and keeps; store: uploads read by the CLI's readers, within a byte budget; jobs: a shared pool of workers, one
request at a time per model, with progress, time limit and cancelling; loaded: the models kept in memory and their
samplers; auth: the token beyond the loopback; app: the page and its JSON API."""
