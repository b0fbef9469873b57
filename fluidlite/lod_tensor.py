"""``fluid.lod_tensor`` (LoDTensor builders):
the fluid 1.8 module path; the code lives in ``fluidlite/pipeline/lod_tensor.py``."""
from .pipeline.lod_tensor import (  # noqa: F401
    create_lod_tensor, create_random_int_lodtensor)

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]
