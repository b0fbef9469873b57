"""``fluid.incubate.fleet.base.fleet_base``: what every fleet mode shares (fluid 1.8):
``Mode``, the ``Fleet`` base class and the ``DistributedOptimizer`` base class. fluidlite
provides the collective mode (``fluid.incubate.fleet.collective``), whose ``fleet`` singleton
and ``CollectiveOptimizer`` derive from these."""
from __future__ import annotations

import abc
from typing import Any, Optional

__all__ = ["Mode", "Fleet", "DistributedOptimizer"]


class Mode:
    """fluid's fleet modes (only ``COLLECTIVE`` is provided: parameter-server training is
    not).

    Args:
        None: a namespace of constants (``TRANSPILER = 1``, ``PSLIB = 2``, ``COLLECTIVE = 3``); it
            is not instantiated.
    Returns:
        int: each attribute is a mode number, passed to ``Fleet(mode)``.
    Raises:
        None: reading a constant does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base.fleet_base import Mode
        >>> Mode.COLLECTIVE
        3
    """
    TRANSPILER = 1
    PSLIB = 2
    COLLECTIVE = 3


class Fleet(abc.ABC):
    """Base of a fleet: a mode, a role maker (``init``) and the worker/server queries derived
    from it; a mode implements the abstract methods.

    Args:
        mode (int): ``Mode.TRANSPILER``, ``Mode.PSLIB`` or ``Mode.COLLECTIVE``.
    Returns:
        Fleet: (a subclass's) fleet object; the abstract base itself cannot be instantiated.
    Raises:
        ValueError: ``mode`` is not one of the ``Mode`` constants.
        TypeError: instantiating ``Fleet`` itself or a subclass that leaves an abstract method
            unimplemented.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> from fluidlite.incubate.fleet.collective import fleet          # the collective Fleet
        >>> fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
        >>> fleet.worker_num(), fleet.worker_index(), fleet.is_first_worker(), fleet.is_worker()
        (1, 0, True, True)
    """

    def __init__(self, mode: int) -> None:
        if mode not in (Mode.TRANSPILER, Mode.PSLIB, Mode.COLLECTIVE):
            raise ValueError(f"Fleet: mode must be Mode.TRANSPILER, Mode.PSLIB or "
                             f"Mode.COLLECTIVE, but received {mode!r}")
        self._mode = mode

    @abc.abstractmethod
    def init_worker(self) -> None: ...

    @abc.abstractmethod
    def run_worker(self, main_programs: Any = None, scopes: Any = None) -> None: ...

    @abc.abstractmethod
    def stop_worker(self) -> None: ...

    @abc.abstractmethod
    def distributed_optimizer(self, optimizer: Any, strategy: Any = None) -> Any: ...

    @abc.abstractmethod
    def save_inference_model(self, executor: Any, dirname: str, feeded_var_names: Any,
                             target_vars: Any, main_program: Any = None,
                             export_for_deployment: bool = True) -> Any: ...

    @abc.abstractmethod
    def save_persistables(self, executor: Any, dirname: str,
                          main_program: Any = None) -> Any: ...


class DistributedOptimizer(abc.ABC):
    """Base of a fleet's optimizer wrapper: holds the wrapped ``optimizer`` and the
    ``strategy``; a mode implements ``backward``, ``apply_gradients`` and ``minimize``.

    Args:
        optimizer (Optimizer): the wrapped optimizer.
        strategy (object | None): the mode's strategy (e.g. a collective ``DistributedStrategy``).
    Returns:
        DistributedOptimizer: (a subclass's) wrapper; ``minimize(loss)`` is the mode's.
    Raises:
        ValueError: ``optimizer`` is not an ``Optimizer``.
        TypeError: instantiating the abstract base itself.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> from fluidlite.incubate.fleet.base.fleet_base import DistributedOptimizer
        >>> from fluidlite.incubate.fleet.collective import fleet
        >>> fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
        >>> opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1))
        >>> isinstance(opt, DistributedOptimizer)
        True
    """

    def __init__(self, optimizer: Any, strategy: Optional[Any] = None) -> None:
        from ....optimizer.base import Optimizer
        if not isinstance(optimizer, Optimizer):
            raise ValueError(f"optimizer must be an instance of Optimizer, but received "
                             f"{type(optimizer).__name__}")
        self._optimizer = optimizer
        self._strategy = strategy

    @abc.abstractmethod
    def backward(self, loss: Any, startup_program: Any = None, parameter_list: Any = None,
                 no_grad_set: Any = None, callbacks: Any = None) -> Any: ...

    @abc.abstractmethod
    def apply_gradients(self, params_grads: Any) -> Any: ...

    @abc.abstractmethod
    def minimize(self, loss: Any, startup_program: Any = None, parameter_list: Any = None,
                 no_grad_set: Any = None) -> Any: ...
