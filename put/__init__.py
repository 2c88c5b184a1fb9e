"""PUT: pluralistic image inpainting (CVPR 2022), reproduced as a pipeline: see README.md."""
