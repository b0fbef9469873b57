"""fluid 1.8's ``DistributeTranspiler`` for its collective modes, on MPI.

fluid 1.8 had three modes (``DistributeTranspilerConfig.mode``):

* ``"nccl2"``: ``transpile`` recorded the trainer endpoints and added the NCCL id exchange to
  the startup program; the gradients were all-reduced by ``ParallelExecutor`` /
  ``CompiledProgram.with_data_parallel``. Here too: ``transpile`` checks the endpoints against
  the MPI launch and records them (``program._trainers_endpoints``); run the program through
  ``CompiledProgram(...).with_data_parallel(loss_name=...)``, which all-reduces over MPI.
* ``"collective"`` (``collective_mode="grad_allreduce"``): the program itself is rewritten by
  ``fluid.transpiler.collective.GradAllReduce`` (all-reduce after backward, broadcast of the
  parameters at startup), with ``nccl_comm_num`` rings.
* ``"pserver"`` (fluid's default): parameter servers. fluidlite has none; ``transpile`` raises
  a ValueError that says which modes exist.

    config = fluid.DistributeTranspilerConfig()
    config.mode = "collective"
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(trainer_id, trainers="10.0.0.1:6170,10.0.0.2:6170",
                current_endpoint="10.0.0.1:6170", startup_program=startup, program=main)
    main = t.get_trainer_program()
"""
from __future__ import annotations

from typing import Any, List, Optional, Union

from ..core.ir import Program, default_main_program, default_startup_program
from .collective import Collective, GradAllReduce
from .ps_dispatcher import PSDispatcher

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig"]

MODES = ("pserver", "nccl2", "collective")


class DistributeTranspilerConfig:
    """fluid 1.8's transpiler settings, with its defaults. ``mode`` selects the strategy
    (see the module docstring); ``nccl_comm_num`` is the number of all-reduce rings of the
    collective mode; the parameter-server settings (``slice_var_up``, ``split_method``,
    ``min_block_size``, ``sync_mode``, ...) are kept for scripts that set them.

    Args:
        **kwargs: settings to override, by name (``mode``, ``collective_mode``, ``nccl_comm_num``,
            ``wait_port``, ``split_method``, ...); every other setting keeps fluid 1.8's default
            (``mode="pserver"``, ``nccl_comm_num=1``, ``wait_port=True``, ...). Settings can also be
            assigned as attributes afterwards.
    Returns:
        DistributeTranspilerConfig: the settings object for ``DistributeTranspiler(config=)``.
    Raises:
        TypeError: a positional argument is given.
        ValueError: a keyword names no setting.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> config = fluid.DistributeTranspilerConfig()
        >>> config.mode = "collective"
        >>> config.collective_mode = "grad_allreduce"
        >>> config.nccl_comm_num = 1
        >>> t = fluid.DistributeTranspiler(config=config)
    """

    slice_var_up = True
    split_method: Optional[type] = None
    min_block_size = 8192
    enable_dc_asgd = False
    mode = "pserver"
    print_log = False
    wait_port = True
    runtime_split_send_recv = False
    sync_mode = True
    half_async = False
    completely_not_async = False
    geo_sgd_mode = False
    geo_sgd_need_push_nums = 100
    nccl_comm_num = 1
    use_hierarchical_allreduce = False
    hierarchical_allreduce_inter_nranks = 0
    collective_mode: Optional[str] = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            raise TypeError("DistributeTranspilerConfig takes keyword settings only")
        for key, value in kwargs.items():
            if not hasattr(type(self), key):
                raise ValueError(f"DistributeTranspilerConfig has no setting {key!r}")
            setattr(self, key, value)


class DistributeTranspiler:
    """``DistributeTranspiler(config=None)``: see the module docstring.

    Args:
        config (DistributeTranspilerConfig | None): the settings (default: a fresh
            ``DistributeTranspilerConfig()``, i.e. the unavailable pserver mode).
    Returns:
        DistributeTranspiler: the transpiler; call ``transpile`` then ``get_trainer_program`` /
        ``get_startup_program``.
    Raises:
        TypeError: ``config`` is not a ``DistributeTranspilerConfig``, or its ``split_method`` is
            not a ``PSDispatcher`` subclass (``HashName`` / ``RoundRobin``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        >>> config = fluid.DistributeTranspilerConfig()
        >>> config.mode = "collective"
        >>> t = fluid.DistributeTranspiler(config=config)
        >>> t.transpile(0, program=main, startup_program=startup, trainers="127.0.0.1:6170",
        ...             current_endpoint="127.0.0.1:6170")
        >>> trainer_program = t.get_trainer_program()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(trainer_program, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0].shape
        (1,)
    """

    def __init__(self, config: Optional[DistributeTranspilerConfig] = None) -> None:
        if config is None:
            config = DistributeTranspilerConfig()
        if not isinstance(config, DistributeTranspilerConfig):
            raise TypeError(f"config must be a fluid.DistributeTranspilerConfig, but received "
                            f"{type(config).__name__}")
        if config.split_method is not None and not (
                isinstance(config.split_method, type)
                and issubclass(config.split_method, PSDispatcher)):
            raise TypeError(f"config.split_method must be fluid.transpiler.HashName or "
                            f"RoundRobin, but received {config.split_method!r}")
        self.config = config
        self.origin_program: Optional[Program] = None
        self.origin_startup_program: Optional[Program] = None
        self._transpiler: Optional[Collective] = None

    def transpile(self, trainer_id: int, program: Optional[Program] = None,
                  pservers: str = "127.0.0.1:6174", trainers: Union[int, str] = 1,
                  sync_mode: bool = True, startup_program: Optional[Program] = None,
                  current_endpoint: str = "127.0.0.1:6174") -> None:
        """Prepare ``program`` (default: the default main program; its optimizer must have
        been applied) for trainer ``trainer_id`` of the comma-separated ``trainers``
        endpoints (see the module docstring for what each mode does).

        Args:
            trainer_id (int): this trainer's index in ``trainers`` (>= 0).
            program (Program | None): the main program to prepare (default: the default main
                program), after ``minimize``.
            pservers (str, default "127.0.0.1:6174"): the parameter-server endpoints of the pserver
                mode, which fluidlite does not provide.
            trainers (str | int, default 1): the comma-separated trainer endpoints
                (``"ip:port,ip:port"``); an int is only valid in pserver mode.
            sync_mode (bool, default True): accepted for fluid's signature (pserver mode).
            startup_program (Program | None): the startup program (default: the default startup
                program).
            current_endpoint (str, default "127.0.0.1:6174"): this trainer's endpoint.
        Returns:
            None: the programs are prepared in place (nccl2: the endpoints are recorded; collective:
            the all-reduce / broadcast ops are added).
        Raises:
            ValueError: ``config.mode`` is ``"pserver"`` or unknown, ``trainer_id`` is not an
                int >= 0 or not below the number of trainers, ``collective_mode`` is not
                ``"grad_allreduce"``, ``nccl_comm_num`` < 1, the program has no backward pass
                (collective mode), or the MPI launch does not match the endpoints.
            TypeError: ``trainers`` is not a str of endpoints.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> t = fluid.DistributeTranspiler()          # the default mode: parameter servers
            >>> try:
            ...     t.transpile(0, program=main, pservers="127.0.0.1:6174", trainers=1)
            ... except ValueError:
            ...     print("pserver mode is not available")
            pserver mode is not available
        """
        mode = self.config.mode
        if mode not in MODES:
            raise ValueError(f"DistributeTranspilerConfig.mode must be one of {MODES}, but "
                             f"received {mode!r}")
        if mode == "pserver":
            raise ValueError("DistributeTranspiler: parameter-server mode (config.mode="
                             "'pserver', the default) is not provided by fluidlite, which "
                             "trains data parallel with all-reduce over MPI: set config.mode "
                             "= 'nccl2' (then run with CompiledProgram.with_data_parallel) "
                             "or 'collective'")
        if isinstance(trainer_id, bool) or not isinstance(trainer_id, int) or trainer_id < 0:
            raise ValueError(f"trainer_id must be an int >= 0, but received {trainer_id!r}")
        if not isinstance(trainers, str):
            raise TypeError(f"in {mode} mode trainers must be the comma-separated trainer "
                            f"endpoints ('ip:port,ip:port'), but received {trainers!r}")
        endpoints = [e for e in trainers.split(",") if e]
        if trainer_id >= len(endpoints):
            raise ValueError(f"trainer_id {trainer_id} is not one of the {len(endpoints)} "
                             f"trainers {endpoints}")
        self.origin_program = program if program is not None else default_main_program()
        self.origin_startup_program = (startup_program if startup_program is not None
                                       else default_startup_program())
        if mode == "nccl2":
            checker = Collective(max(1, int(self.config.nccl_comm_num)))
            checker._setup(self.origin_startup_program, self.origin_program, trainer_id,
                           endpoints, current_endpoint)
            self.origin_program._trainers_endpoints = endpoints
            self.origin_program._nccl_comm_num = int(self.config.nccl_comm_num)
            self._transpiler = checker
            return
        collective_mode = self.config.collective_mode or "grad_allreduce"
        if collective_mode != "grad_allreduce":
            raise ValueError(f"config.collective_mode must be 'grad_allreduce' (fluidlite's "
                             f"collective mode), but received {collective_mode!r}")
        t = GradAllReduce(max(1, int(self.config.nccl_comm_num)))
        t.transpile(startup_program=self.origin_startup_program,
                    main_program=self.origin_program, rank=trainer_id, endpoints=endpoints,
                    current_endpoint=current_endpoint, wait_port=self.config.wait_port)
        self._transpiler = t

    def _transpiled(self, what: str) -> Program:
        if self.origin_program is None:
            raise RuntimeError(f"DistributeTranspiler.{what}: call transpile() first")
        return self.origin_program

    def get_trainer_program(self, wait_port: bool = True) -> Program:
        """The trainer's program (the one ``transpile`` prepared).

        Args:
            wait_port (bool, default True): accepted for fluid's signature.
        Returns:
            Program: the main program ``transpile`` prepared.
        Raises:
            RuntimeError: ``transpile`` was not called.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> config = fluid.DistributeTranspilerConfig()
            >>> config.mode = "collective"
            >>> t = fluid.DistributeTranspiler(config=config)
            >>> t.transpile(0, program=main, startup_program=startup, trainers="127.0.0.1:6170",
            ...             current_endpoint="127.0.0.1:6170")
            >>> trainer = t.get_trainer_program()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> exe.run(trainer, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0].shape
            (1,)
        """
        return self._transpiled("get_trainer_program")

    def get_startup_program(self, endpoint: Optional[str] = None,
                            pserver_program: Optional[Program] = None,
                            startup_program: Optional[Program] = None) -> Program:
        """The trainer's startup program (in collective mode it broadcasts the parameters).

        Args:
            endpoint (str | None): accepted for fluid's signature (a pserver endpoint).
            pserver_program (Program | None): accepted for fluid's signature.
            startup_program (Program | None): accepted for fluid's signature; the startup program
                given to ``transpile`` is returned.
        Returns:
            Program: the startup program ``transpile`` prepared.
        Raises:
            RuntimeError: ``transpile`` was not called.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> config = fluid.DistributeTranspilerConfig()
            >>> config.mode = "collective"
            >>> t = fluid.DistributeTranspiler(config=config)
            >>> t.transpile(0, program=main, startup_program=startup, trainers="127.0.0.1:6170",
            ...             current_endpoint="127.0.0.1:6170")
            >>> t.get_startup_program("127.0.0.1:6170", startup_program=startup) is startup
            True
        """
        self._transpiled("get_startup_program")
        return self.origin_startup_program                       # type: ignore[return-value]

    def _no_pserver(self, what: str) -> ValueError:
        return ValueError(f"DistributeTranspiler.{what}: there are no parameter servers in "
                         f"{self.config.mode} mode (fluidlite provides nccl2 and collective "
                         f"modes only)")

    def get_pserver_program(self, endpoint: str) -> Program:
        """Parameter-server mode only: ValueError here (see the module docstring).

        Args:
            endpoint (str): the parameter server's endpoint.
        Returns:
            Program: never; there are no parameter servers.
        Raises:
            ValueError: always (fluidlite provides the nccl2 and collective modes only).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.DistributeTranspiler()                    # parameter-server mode
            >>> try:
            ...     t.get_pserver_program("127.0.0.1:6174")
            ... except ValueError:
            ...     print("parameter servers are not available: use the collective or nccl2 mode")
            parameter servers are not available: use the collective or nccl2 mode
        """
        raise self._no_pserver("get_pserver_program")

    def get_pserver_programs(self, endpoint: str) -> List[Program]:
        """Parameter-server mode only: ValueError here (see the module docstring).

        Args:
            endpoint (str): the parameter server's endpoint.
        Returns:
            list of Program: never; there are no parameter servers.
        Raises:
            ValueError: always (fluidlite provides the nccl2 and collective modes only).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.DistributeTranspiler()                    # parameter-server mode
            >>> try:
            ...     t.get_pserver_programs("127.0.0.1:6174")
            ... except ValueError:
            ...     print("parameter servers are not available: use the collective or nccl2 mode")
            parameter servers are not available: use the collective or nccl2 mode
        """
        raise self._no_pserver("get_pserver_programs")
