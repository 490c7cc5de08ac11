"""tilesafe.gpu: run compiled kernels on a Hopper GPU (numpy and cuda-python only)."""
