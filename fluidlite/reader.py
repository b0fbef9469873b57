"""``fluid.reader`` (DataLoader / PyReader, ``default_collate_fn``):
the fluid 1.8 module path; the loaders live in ``fluidlite/pipeline/reader.py``."""
from __future__ import annotations

from typing import Any, List, Sequence

import numpy as np

from .pipeline.reader import (  # noqa: F401
    DataLoader, PyReader, GeneratorLoader, EOFException)

__all__ = ["DataLoader", "PyReader", "GeneratorLoader", "EOFException", "default_collate_fn"]


def default_collate_fn(batch: Sequence[Any]) -> List[np.ndarray]:
    """Stack a list of samples into one array per field (fluid 1.8's default batch collation).

    A sample is a list of fields ``[field_1, ..., field_k]`` (numpy arrays or numbers); the
    result is ``[stack(field_1 of every sample), ..., stack(field_k ...)]``, each with the
    batch as its new first axis. A sample that is a single numpy array is a one-field sample:
    the result is ``[stack(batch)]``.

    Args:
        batch: the samples of one batch.

    Returns:
        one stacked array per field.

    Example:
        >>> import numpy as np
        >>> from fluidlite.reader import default_collate_fn
        >>> img, label = default_collate_fn([[np.zeros(3), 1], [np.ones(3), 0]])
        >>> img.shape, label.tolist()
        ((2, 3), [1, 0])
    """
    if isinstance(batch[0], np.ndarray):
        return [np.stack(batch, axis=0)]
    fields: List[List[Any]] = [[] for _ in batch[0]]
    for sample in batch:
        if len(sample) != len(fields):
            raise ValueError(f"default_collate_fn: every sample must have {len(fields)} "
                             f"fields (as the first one), but one has {len(sample)}")
        for slot, item in zip(fields, sample):
            slot.append(item)
    return [np.stack(slot, axis=0) for slot in fields]
