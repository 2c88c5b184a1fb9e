"""Reports: the paper's reported numbers, LaTeX tables beside our measurements, plots, sample grids and
the compiled PDF that gathers them."""
