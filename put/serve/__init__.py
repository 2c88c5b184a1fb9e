"""`put serve`: a local web app to inpaint in the browser with the trained variants (see README, "Inpainting in
the browser"). catalog: the models and test images the page may choose, by id; store: uploads read by the CLI's
readers; jobs: one request at a time per model, with progress; app: the page and its JSON API."""
