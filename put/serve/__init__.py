"""`put serve`: a local web app to inpaint in the browser with the trained variants (docs/serving.md, "Inpainting
in the browser"): catalog, limits, store (uploads), jobs (a shared worker pool, one request per model at a time),
loaded (models in memory), auth (the token beyond the loopback), app (the page and its JSON API)."""
