"""``fluid.transpiler``: the collective transpilers (``collective.GradAllReduce``) on MPI."""
from . import collective  # noqa: F401
