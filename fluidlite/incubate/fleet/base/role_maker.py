"""fluid 1.8's ``fluid.incubate.fleet.base.role_maker`` for collective (data-parallel) training.

A role maker says which trainer this process is (``worker_index``) among how many
(``worker_num``). In collective mode every process is a worker; there are no servers. The
numbers must agree with the MPI launch (``mpirun -n N`` / ``fluidlite.distributed.launch``):
a role that disagrees raises at ``fleet.init`` instead of deadlocking in the first all-reduce.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence

from ....distributed import comm as _comm

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedRoleMaker",
           "UserDefinedCollectiveRoleMaker", "MPISymetricRoleMaker"]


class Role:
    """fluid's process roles: ``Role.WORKER`` (1, a trainer) and ``Role.SERVER`` (2, a parameter
    server; fluidlite trains collectively, with workers only).

    Args:
        None: a namespace of constants (``WORKER = 1``, ``SERVER = 2``); it is not instantiated.
    Returns:
        int: each attribute is a role number, e.g. for ``UserDefinedRoleMaker(role=)``.
    Raises:
        None: reading a constant does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> role_maker.Role.WORKER, role_maker.Role.SERVER
        (1, 2)
    """
    WORKER = 1
    SERVER = 2


class RoleMakerBase:
    """Holds the role; ``generate_role()`` fills it in (fleet.init calls it).

    Args:
        None: the constructor takes no arguments (one worker, index 0).
    Returns:
        RoleMakerBase: the role maker; ``worker_index()``, ``worker_num()``, ``is_worker()``,
        ``is_first_worker()``, ``get_trainer_endpoints()`` ... query it.
    Raises:
        None: the base constructor and its queries do not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> # a RoleMakerBase
        >>> role = role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"])
        >>> role.generate_role()
        >>> role.is_worker(), role.is_server(), role.get_trainer_endpoints()
        (True, False, ['127.0.0.1:6170'])
    """

    def __init__(self) -> None:
        self._worker_endpoints: List[str] = []
        self._server_endpoints: List[str] = []
        self._role = Role.WORKER
        self._current_id = 0
        self._worker_num = 1
        self._role_is_generated = False

    def generate_role(self) -> None:
        self._role_is_generated = True

    def is_worker(self) -> bool:
        return self._role == Role.WORKER

    def is_server(self) -> bool:
        return self._role == Role.SERVER

    def is_first_worker(self) -> bool:
        return self.is_worker() and self._current_id == 0

    def worker_index(self) -> int:
        return self._current_id

    def server_index(self) -> int:
        return self._current_id if self.is_server() else 0

    def worker_num(self) -> int:
        return self._worker_num

    def get_trainer_endpoints(self) -> List[str]:
        return list(self._worker_endpoints)

    def get_pserver_endpoints(self) -> List[str]:
        return list(self._server_endpoints)

    def _check_launch(self, who: str) -> None:
        """The role must be the launch's: same rank, same number of processes."""
        rank, size = _comm.env_rank_size()
        if self._worker_num != size or self._current_id != rank:
            raise ValueError(
                f"{who}: the role says trainer {self._current_id} of {self._worker_num}, but this "
                f"process is rank {rank} of {size} in its launch; launch {self._worker_num} "
                f"processes (python -m fluidlite.distributed.launch --nproc_per_node "
                f"{self._worker_num} train.py)")

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(worker_index={self._current_id}, "
                f"worker_num={self._worker_num})")


class PaddleCloudRoleMaker(RoleMakerBase):
    """The role from the environment: ``PADDLE_TRAINER_ID``, ``PADDLE_TRAINERS_NUM``,
    ``PADDLE_TRAINER_ENDPOINTS`` (comma-separated) when set, else the MPI rank and size. Only
    ``is_collective=True`` (data parallel) is provided.

    Args:
        is_collective (bool, default False): must be True (collective mode is the only one).
        **kwargs: fluid's other keyword settings, accepted and unused.
    Returns:
        PaddleCloudRoleMaker: the role maker; ``generate_role()`` (called by ``fleet.init``) reads
        the environment.
    Raises:
        ValueError: ``is_collective`` is False; in ``generate_role``, the environment's ids are
            not integers or do not match the MPI launch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> import os
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> os.environ.update(PADDLE_TRAINER_ID="0", PADDLE_TRAINERS_NUM="1",
        ...                   PADDLE_TRAINER_ENDPOINTS="127.0.0.1:6170")
        >>> role = role_maker.PaddleCloudRoleMaker(is_collective=True)
        >>> role.generate_role()
        >>> role.worker_num(), role.worker_index()
        (1, 0)
        >>> for k in ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS"):
        ...     del os.environ[k]
    """

    def __init__(self, is_collective: bool = False, **kwargs: object) -> None:
        super().__init__()
        if not is_collective:
            raise ValueError("PaddleCloudRoleMaker: fluidlite provides fleet's collective mode "
                             "only (parameter servers are not provided); pass "
                             "is_collective=True")
        self._is_collective = True

    def generate_role(self) -> None:
        if self._role_is_generated:
            return
        rank, size = _comm.env_rank_size()
        tid = os.environ.get("PADDLE_TRAINER_ID")
        num = os.environ.get("PADDLE_TRAINERS_NUM")
        eps = os.environ.get("PADDLE_TRAINER_ENDPOINTS", "")
        self._worker_endpoints = [e for e in eps.split(",") if e]
        try:
            self._current_id = int(tid) if tid is not None else rank
            self._worker_num = int(num) if num is not None else (
                len(self._worker_endpoints) if self._worker_endpoints and size == 1 else size)
        except ValueError:
            raise ValueError(f"PaddleCloudRoleMaker: PADDLE_TRAINER_ID={tid!r} and "
                             f"PADDLE_TRAINERS_NUM={num!r} must be integers") from None
        self._check_launch("PaddleCloudRoleMaker")
        self._role_is_generated = True


class UserDefinedCollectiveRoleMaker(RoleMakerBase):
    """``current_id`` among ``worker_endpoints`` (one per trainer).

    Args:
        current_id (int, default 0): this trainer's index in ``worker_endpoints`` (>= 0).
        worker_endpoints (list of str | None): one ``"ip:port"`` per trainer (default: one per
            process of the MPI launch).
    Returns:
        UserDefinedCollectiveRoleMaker: the role maker for ``fleet.init``.
    Raises:
        ValueError: ``current_id`` is not an int >= 0 or not an index of ``worker_endpoints``; in
            ``generate_role``, the role does not match the MPI launch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> role = role_maker.UserDefinedCollectiveRoleMaker(
        ...     current_id=0, worker_endpoints=["127.0.0.1:6170"])    # one trainer: this process
        >>> role.generate_role()
        >>> role.worker_num(), role.worker_index(), role.is_first_worker()
        (1, 0, True)
    """

    def __init__(self, current_id: int = 0,
                 worker_endpoints: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        if not isinstance(current_id, int) or current_id < 0:
            raise ValueError(f"UserDefinedCollectiveRoleMaker: current_id must be an int >= 0, "
                             f"got {current_id!r}")
        if worker_endpoints is None:
            worker_endpoints = ["127.0.0.1:%d" % (6170 + i)
                                for i in range(_comm.env_rank_size()[1])]
        self._worker_endpoints = list(worker_endpoints)
        self._current_id = current_id
        self._worker_num = len(self._worker_endpoints)
        if current_id >= self._worker_num:
            raise ValueError(f"UserDefinedCollectiveRoleMaker: current_id {current_id} is not "
                             f"an index of worker_endpoints ({self._worker_num} entries)")

    def generate_role(self) -> None:
        self._check_launch("UserDefinedCollectiveRoleMaker")
        self._role_is_generated = True


class UserDefinedRoleMaker(RoleMakerBase):
    """fluid's ``UserDefinedRoleMaker(current_id, role, worker_num, server_endpoints)``; in
    collective mode ``role`` must be ``Role.WORKER``.

    Args:
        current_id (int, default 0): this trainer's index.
        role (int, default Role.WORKER): ``Role.WORKER`` (``Role.SERVER`` is refused by
            ``generate_role``).
        worker_num (int, default 0): the number of trainers (0: the MPI launch's size).
        server_endpoints (list of str | None): parameter-server endpoints, kept for fluid's
            signature.
    Returns:
        UserDefinedRoleMaker: the role maker for ``fleet.init``.
    Raises:
        ValueError: ``role`` is not a ``Role`` constant or ``worker_num`` is not an int >= 0; in
            ``generate_role``, ``role`` is ``Role.SERVER`` or the role does not match the launch.
        TypeError: ``server_endpoints`` is not a list of strings (e.g. one ``"ip:port"``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> role = role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.WORKER,
        ...                                        worker_num=1)
        >>> role.generate_role()
        >>> role.is_worker(), role.worker_index(), role.worker_num()
        (True, 0, 1)
    """

    def __init__(self, current_id: int = 0, role: int = Role.WORKER, worker_num: int = 0,
                 server_endpoints: Optional[Sequence[str]] = None) -> None:
        super().__init__()
        if role not in (Role.WORKER, Role.SERVER):
            raise ValueError(f"UserDefinedRoleMaker: role must be Role.WORKER or Role.SERVER, "
                             f"got {role!r}")
        if not isinstance(worker_num, int) or worker_num < 0:
            raise ValueError(f"UserDefinedRoleMaker: worker_num must be an int >= 0, got "
                             f"{worker_num!r}")
        if server_endpoints is not None and (isinstance(server_endpoints, (str, bytes)) or
                                             not all(isinstance(e, str)
                                                     for e in server_endpoints)):
            # fluid's message; a single "ip:port" string would otherwise become its characters
            raise TypeError(f"UserDefinedRoleMaker: server_endpoints must be as string list, "
                            f"e.g. ['127.0.0.1:6170'], got {server_endpoints!r}")
        self._role = role
        self._current_id = current_id
        self._worker_num = worker_num or _comm.env_rank_size()[1]
        self._server_endpoints = list(server_endpoints or [])

    def generate_role(self) -> None:
        if self._role != Role.WORKER:
            raise ValueError("UserDefinedRoleMaker: fleet's collective mode has workers only "
                             "(role=Role.SERVER is for parameter servers, not provided)")
        self._check_launch("UserDefinedRoleMaker")
        self._role_is_generated = True


class MPISymetricRoleMaker(PaddleCloudRoleMaker):
    """The role from the MPI launch alone (every process a worker).

    Args:
        None: the constructor takes no arguments; the role comes from the MPI launch.
    Returns:
        MPISymetricRoleMaker: the role maker for ``fleet.init``.
    Raises:
        ValueError: in ``generate_role``, ``PADDLE_TRAINER_ID`` / ``PADDLE_TRAINERS_NUM`` are set
            but not integers, or do not match the MPI launch.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> role = role_maker.MPISymetricRoleMaker()
        >>> role.generate_role()                   # without mpirun: one worker
        >>> role.worker_num(), role.is_worker()
        (1, True)
    """

    def __init__(self) -> None:
        super().__init__(is_collective=True)
