"""Which OpenBLAS kernels a benchmark ran with (import before NumPy is not needed).

OpenBLAS picks its kernel set when it loads: from CPUID, or from ``OPENBLAS_CORETYPE`` when
the environment names one. This project's machines (AMD EPYC with AVX-512) export
``OPENBLAS_CORETYPE=Haswell``: NumPy's GEMMs then run AVX2 kernels, ~1.4x slower than the
AVX-512 ones OpenBLAS chooses by itself there, while PyTorch's oneDNN and MKL read the ISA
themselves. The benchmarks leave the setting as they find it and print ``describe()`` in
their header, so every ratio can be read against the kernels that produced it (run them
under ``env -u OPENBLAS_CORETYPE`` for OpenBLAS's own choice).
"""
from __future__ import annotations

import ctypes
import glob
import os


def describe() -> str:
    """The OpenBLAS kernel set NumPy loaded ("unknown" when it cannot be asked), and the
    ``OPENBLAS_CORETYPE`` that chose it if one is set."""
    import numpy as np
    pinned = os.environ.get("OPENBLAS_CORETYPE")
    suffix = f", OPENBLAS_CORETYPE={pinned}" if pinned else ""
    pattern = os.path.join(os.path.dirname(np.__file__), "..", "numpy.libs", "*openblas*")
    for path in glob.glob(pattern):
        lib = ctypes.CDLL(path)
        for name in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                     "openblas_get_corename64_", "openblas_get_corename"):
            fn = getattr(lib, name, None)
            if fn is not None:
                fn.restype = ctypes.c_char_p
                return fn().decode() + suffix
    return "unknown" + suffix
