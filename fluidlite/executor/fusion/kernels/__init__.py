"""The fused kernels: what a fusion computes (``fusion/patterns/`` says when it applies).

Kernels hold no Program, Block or Operator (only names, dtypes and attrs); scratch memory is per
thread (``ops.inplace.scratch``), so two threads may run one plan on different scopes.
"""
