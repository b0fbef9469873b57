"""The fluidlite version (a leaf module: formats/serialize.py stamps it into saved programs)."""
__version__ = "0.1.0"
