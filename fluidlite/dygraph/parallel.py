"""fluid 1.8's ``fluid.dygraph.parallel``: data-parallel dygraph training on MPI (issue 17).

::

    strategy = fluid.dygraph.parallel.prepare_context()
    model = fluid.dygraph.parallel.DataParallel(MyLayer(), strategy)
    loss = model.scale_loss(my_loss(model(x_shard)))   # loss / nranks
    loss.backward()
    model.apply_collective_grads()                       # sum over ranks: the mean gradient
    opt.minimize(loss)
    model.clear_gradients()

Run under ``python -m fluidlite.distributed.launch --nproc_per_node N train.py``; alone (one
process) ``scale_loss`` and ``apply_collective_grads`` change nothing. ``DataParallel`` broadcasts
the layer's parameters from rank 0 when it is created, so ranks start identical whatever their
seeds. ``apply_collective_grads`` packs the gradients of each dtype into one buffer and runs
one ``c_allreduce_sum`` kernel on it (fluid's coalesced all-reduce), then unpacks them.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

import numpy as np

from ..core.registry import get_op_def
from ..distributed import comm as _comm
from .layers import Layer

__all__ = ["Env", "ParallelEnv", "ParallelStrategy", "prepare_context", "DataParallel"]


class ParallelEnv:
    """This process's place in the launch: ``nranks``, ``local_rank``, ``dev_id`` (always 0:
    one CPU per process), ``current_endpoint``, ``trainer_endpoints``.

    Args:
        None: the constructor takes no arguments; it reads ``PADDLE_TRAINERS_NUM``,
            ``PADDLE_TRAINER_ID``, ``PADDLE_TRAINER_ENDPOINTS``, ``PADDLE_CURRENT_ENDPOINT`` and
            the MPI launch.
    Returns:
        ParallelEnv: the environment, read through its properties.
    Raises:
        ValueError: ``PADDLE_TRAINERS_NUM`` or ``PADDLE_TRAINER_ID`` is set but not an integer.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> env = fluid.dygraph.ParallelEnv()
        >>> env.nranks, env.local_rank                   # outside a distributed launch
        (1, 0)
    """

    def __init__(self) -> None:
        rank, size = _comm.env_rank_size()
        self._nranks = int(os.environ.get("PADDLE_TRAINERS_NUM", size))
        self._local_rank = int(os.environ.get("PADDLE_TRAINER_ID", rank))
        eps = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "")
        self._trainer_endpoints = [e for e in eps.split(",") if e]
        self._current_endpoint = os.environ.get("PADDLE_CURRENT_ENDPOINT", "")

    @property
    def nranks(self) -> int:
        return self._nranks

    @property
    def local_rank(self) -> int:
        return self._local_rank

    @property
    def dev_id(self) -> int:
        return 0

    @property
    def current_endpoint(self) -> str:
        return self._current_endpoint

    @property
    def trainer_endpoints(self) -> List[str]:
        return list(self._trainer_endpoints)


Env = ParallelEnv


class ParallelStrategy:
    """``nranks``, ``local_rank``, ``trainer_endpoints``, ``current_endpoint``."""

    def __init__(self) -> None:
        self.nranks = 1
        self.local_rank = 0
        self.trainer_endpoints: List[str] = []
        self.current_endpoint = ""


def prepare_context(strategy: Optional[ParallelStrategy] = None) -> ParallelStrategy:
    """Join the launch (checked against ``strategy`` when given) and return the strategy.

    Args:
        strategy (ParallelStrategy | None): the expected ranks (default: built from the launch
            and the environment).
    Returns:
        ParallelStrategy: ``strategy`` (or the one built), for ``DataParallel``.
    Raises:
        ValueError: ``strategy``'s ``nranks`` / ``local_rank`` differ from the MPI launch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     strategy = fluid.dygraph.prepare_context()   # one process: nranks 1
        ...     print(strategy.nranks, strategy.local_rank)
        1 0
    """
    world = _comm.world()
    if strategy is None:
        env = ParallelEnv()
        strategy = ParallelStrategy()
        strategy.nranks, strategy.local_rank = world.size, world.rank
        strategy.trainer_endpoints = env.trainer_endpoints
        strategy.current_endpoint = env.current_endpoint
    if (strategy.nranks, strategy.local_rank) != (world.size, world.rank):
        raise ValueError(f"prepare_context: the strategy says rank {strategy.local_rank} of "
                         f"{strategy.nranks}, but this process is rank {world.rank} of "
                         f"{world.size} in its launch")
    return strategy


class DataParallel(Layer):
    """Wraps ``layers`` for data-parallel training (see the module docstring).

    Args:
        layers (Layer): the model to wrap; its parameters are broadcast from rank 0.
        strategy (ParallelStrategy | None): from ``prepare_context`` (default: prepared now).
    Returns:
        DataParallel: a Layer whose forward is ``layers``' (calling it returns what ``layers``
        returns); ``scale_loss`` and ``apply_collective_grads`` do the data-parallel steps.
    Raises:
        ValueError: ``strategy`` does not match the MPI launch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> with fluid.dygraph.guard():
        ...     strategy = fluid.dygraph.prepare_context()       # one process: a plain wrapper
        ...     model = fluid.dygraph.DataParallel(fluid.dygraph.Linear(2, 1), strategy)
        ...     loss = fluid.layers.mean(model(fluid.dygraph.to_variable(np.ones((4, 2), "float32"))))
        ...     loss = model.scale_loss(loss)
        ...     loss.backward()
        ...     model.apply_collective_grads()
        ...     print(loss.shape)
        [1]
    """

    def __init__(self, layers: Layer, strategy: Optional[ParallelStrategy] = None) -> None:
        super().__init__(layers.full_name() + "_data_parallel")
        self._layers = layers
        self._strategy = prepare_context(strategy)
        self._nranks = self._strategy.nranks
        if self._nranks > 1:
            bcast = get_op_def("c_broadcast")
            for p in layers.parameters():
                p.set_value(bcast.forward(p.numpy(), ring_id=0, root=0)["Out"])

    def forward(self, *inputs: Any, **kwargs: Any) -> Any:
        return self._layers(*inputs, **kwargs)

    def scale_loss(self, loss: Any) -> Any:
        """``loss / nranks`` (``loss`` unchanged alone): the summed gradients are then the mean
        over ranks."""
        if self._nranks < 2:
            return loss
        from .. import layers as _layers
        return _layers.scale(loss, scale=1.0 / self._nranks)

    def apply_collective_grads(self) -> None:
        """Sum every parameter's gradient over the ranks (one all-reduce per dtype)."""
        if self._nranks < 2:
            return
        params = [p for p in self._layers.parameters()
                  if p.trainable and not p.stop_gradient and p._grad is not None]
        groups: Dict[Any, List[Any]] = {}
        for p in params:
            groups.setdefault(np.asarray(p._grad).dtype, []).append(p)
        reduce = get_op_def("c_allreduce_sum")
        for dtype, ps in groups.items():
            flat = np.concatenate([np.asarray(p._grad, dtype=dtype).ravel() for p in ps])
            total = reduce.forward(flat, ring_id=0)["Out"]
            offset = 0
            for p in ps:
                n = int(np.prod(np.shape(p._grad)))
                p._grad = total[offset:offset + n].reshape(np.shape(p._grad))
                offset += n

    def state_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._layers.state_dict(*args, **kwargs)

    def set_dict(self, *args: Any, **kwargs: Any) -> Any:
        return self._layers.set_dict(*args, **kwargs)

    load_dict = set_dict
