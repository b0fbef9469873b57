"""The fluidlite version (a leaf module: core/serialize.py stamps it into saved programs)."""
__version__ = "0.1.0"
