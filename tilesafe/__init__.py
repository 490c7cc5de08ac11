"""tilesafe: formal verification for Hopper GPU kernels."""
__version__ = "0.1.0"
