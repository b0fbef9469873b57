"""``fluid.io``: checkpoints (save/load vars, params, persistables), inference models, and
``fluid.save`` / ``fluid.load`` / ``load_program_state`` / ``set_program_state``.

File layout follows fluid: one file per variable named exactly after it (or one combined file),
``__model__`` for an inference program, ``<path>.pdparams`` / ``.pdopt`` / ``.pdmodel`` for
``fluid.save``. By default (issue 18) the contents are what fluid 1.8 writes: programs are
Paddle's ``ProgramDesc`` protobuf and tensors Paddle's LoDTensor streams (a combined file: the
streams in sorted name order), see ``formats/paddle`` and ``docs/file_formats.md``; loaders
recognise both families by their first bytes. With ``format="json"`` the savers write
fluidlite's own formats instead:

* a variable file is a NumPy ``.npy`` file; a combined file is a zip of ``<name>.npy`` members
  (an ``.npz``); both are read with ``allow_pickle=False``;
* ``__model__`` / ``.pdmodel`` hold the program as versioned JSON (``formats/serialize.py``);
* ``.pdparams`` / ``.pdopt`` are pickled ``{name: ndarray}`` dicts (protocol 2) like fluid's, so
  they are the same kind of file; they are read with a restricted unpickler that only rebuilds
  numpy arrays and dtypes and rejects every other global, so loading one never runs code.

**Every save is all-or-nothing** (``formats/checkpoint.py``). The files of one call --
``save_vars`` / ``save_params`` / ``save_persistables`` (per-variable files or one combined
file), ``save_inference_model`` (variables and ``__model__`` together), ``fluid.save`` (its three
files) -- are staged in a hidden directory next to them, then committed by one rename: of the
directory's manifest ``.fluidlite-manifest.json``, which lists every file's size and SHA-256
and the staging directory; only then are the staged files renamed into place. Loaders read a
listed file from the staging directory while a committed publish is unfinished, so after a
crash at any instant every loader sees exactly the previous checkpoint (crash before the
commit) or exactly the new one (after it) -- never a mix. The next save to the directory
finishes an interrupted publish and deletes what crashed saves left behind. Saves to one
directory are serialized by an exclusive ``flock`` on it (threads and processes); loaders hold a
shared one. Files not listed in a manifest (no fluidlite manifest: written by something else)
are read as before, unverified.

**Loading checks before it allocates, and before it touches the scope.** A listed file whose
size or checksum differs from the manifest is refused (it was truncated or changed after the
save). An ``.npy`` header must describe exactly the bytes that follow it, and match the
variable's shape and dtype, before its data is read; a combined file's member is checked the
same way against its declared size, so a compressed member cannot expand beyond it; a pickle
can only rebuild arrays whose data it really holds; nothing larger than this machine's memory is
allocated. Every failure -- missing, truncated, corrupted or lying files, wrong shapes or
dtypes -- raises an error naming the variable and the file, and the scope is written only
when every value is fine, so a failed load leaves it untouched.
"""
from __future__ import annotations

from typing import Callable, Optional

from ..formats.checkpoint import CheckpointError  # noqa: F401  (fluid.io names below)
from .files import LOD_SIDECAR, SAVE_FORMATS  # noqa: F401
from .inference import (feed_fetch_targets, load_inference_model,  # noqa: F401
                        read_program, save_inference_model)
from .program_state import load, load_program_state, save, set_program_state
from .variables import (get_parameter_value, get_parameter_value_by_name, get_program_parameter,
                        get_program_persistable_vars, is_belong_to_optimizer, is_parameter,
                        is_persistable, load_params, load_persistables, load_vars, save_params,
                        save_persistables, save_vars)
# the data pipeline: fluid.io.DataLoader / PyReader and the reader decorators
from ..pipeline import decorators as _decorators
from ..pipeline.decorators import (ComposeNotAligned, batch, buffered, cache,  # noqa: F401
                                   chain, compose, firstn, map_readers, multiprocess_reader,
                                   xmap_readers)
from ..pipeline.reader import DataLoader, PyReader  # noqa: F401

__all__ = ["is_parameter", "is_persistable", "is_belong_to_optimizer", "get_program_parameter",
           "get_program_persistable_vars", "save_vars", "save_params", "save_persistables",
           "load_vars", "load_params", "load_persistables", "save_inference_model",
           "load_inference_model", "save", "load", "load_program_state", "set_program_state",
           "CheckpointError", "get_parameter_value", "get_parameter_value_by_name"]


def shuffle(reader: Callable, buffer_size: int, seed: Optional[int] = None) -> Callable:
    """``fluid.io.shuffle``: the samples of ``reader`` shuffled within windows of
    ``buffer_size`` (fluid 1.8's spelling of ``paddle.reader.shuffle(reader, buf_size)``).

    Args:
        reader (callable): a sample reader.
        buffer_size (int): how many samples are shuffled together.
        seed (int | None): makes the order reproducible.
    Returns:
        callable: a reader of the same samples in shuffled order.

    Raises:
        TypeError: ``buffer_size`` is not an int.
        ValueError: ``buffer_size`` is below 1 (the samples would come back unshuffled).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> def reader():
        ...     yield from range(6)
        >>> sorted(fluid.io.shuffle(reader, 3)())     # the same items, in random order
        [0, 1, 2, 3, 4, 5]
    """
    return _decorators.shuffle(reader, buffer_size, seed)
