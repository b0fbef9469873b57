"""``fluid.data_feeder`` (DataFeeder and the argument checks):
the fluid 1.8 module path; the code lives in ``fluidlite/pipeline/feeder.py``."""
from .pipeline.feeder import (  # noqa: F401
    DataFeeder, convert_dtype, check_type, check_dtype, check_variable_and_dtype,
    check_type_and_dtype)

__all__ = ["DataFeeder",
           "convert_dtype",
           "check_type",
           "check_dtype",
           "check_variable_and_dtype",
           "check_type_and_dtype"]
