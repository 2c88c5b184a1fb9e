"""Datasets: the embedded demo set, folder layouts of the paper datasets, splits, images."""
