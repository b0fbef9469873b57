"""``fluid.reader`` (DataLoader / PyReader):
the fluid 1.8 module path; the code lives in ``fluidlite/pipeline/reader.py``."""
from .pipeline.reader import (  # noqa: F401
    DataLoader, PyReader, GeneratorLoader, EOFException)

__all__ = ["DataLoader", "PyReader", "GeneratorLoader", "EOFException"]
