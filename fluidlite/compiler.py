"""``CompiledProgram`` and strategies. ``with_data_parallel`` is data parallel across the
processes of an MPI launch (``fluidlite.distributed``); alone it runs the program unchanged."""
from __future__ import annotations

import enum
import os
import weakref
from typing import Any, Dict, Optional, Tuple

from .core.ir import Program

__all__ = ["CompiledProgram", "BuildStrategy", "ExecutionStrategy", "ParallelExecutor"]


class _ReduceStrategy(enum.IntEnum):
    """``BuildStrategy.ReduceStrategy`` (fluid 1.8's pybind enum): how gradients are combined
    across devices. fluidlite's data-parallel pass always all-reduces."""
    AllReduce = 0
    Reduce = 1


class _GradientScaleStrategy(enum.IntEnum):
    """``BuildStrategy.GradientScaleStrategy``: the start gradient of the loss across devices
    (1/N, 1, or fed by the user). fluidlite's data-parallel pass always scales by 1/N."""
    CoeffNumDevice = 0
    One = 1
    Customized = 2


class BuildStrategy:
    """How ``with_data_parallel`` builds the data-parallel program.

    Honoured: ``fuse_all_reduce_ops`` (default True) and ``fuse_grad_size_in_MB`` (32) pack
    small gradients into all-reduce buckets; ``overlap_allreduce`` (fluidlite's; default on)
    overlaps them with backward; ``reduce_strategy`` ``Reduce`` gives the same numbers as
    ``AllReduce`` here (one CPU per process); ``gradient_scale_strategy`` must be the default
    ``CoeffNumDevice`` (gradients averaged over the processes) -- ``One`` and ``Customized``
    are refused at ``with_data_parallel``. fluid's graph-optimisation switches
    (``fuse_elewise_add_act_ops``, ``enable_inplace``, ``memory_optimize``, ...) concern
    GPU kernels and memory reuse that fluidlite's executor always does its own way; they may
    be set and do not change results (docs/compatibility.md).

    Args:
        None: the constructor takes no arguments; set the options as attributes.

    Returns:
        BuildStrategy: an options object for ``CompiledProgram`` / ``with_data_parallel``.

    Raises:
        None: the constructor does not raise; ``with_data_parallel`` raises ValueError for a
            ``gradient_scale_strategy`` other than ``CoeffNumDevice``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> build = fluid.BuildStrategy()
        >>> build.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.AllReduce
        >>> build.fuse_all_reduce_ops = True
        >>> compiled = fluid.CompiledProgram(fluid.Program(), build_strategy=build)
    """
    # issue 16: fluid 1.8's nested enums and their defaults (additive)
    ReduceStrategy = _ReduceStrategy
    GradientScaleStrategy = _GradientScaleStrategy
    reduce_strategy = _ReduceStrategy.AllReduce
    gradient_scale_strategy = _GradientScaleStrategy.CoeffNumDevice


class ExecutionStrategy:
    """fluid's executor threading and scope-dropping knobs (``num_threads``,
    ``num_iteration_per_drop_scope``, ...): fluidlite runs one compiled plan per step and keeps
    no per-iteration scopes, so they may be set and do not change results
    (docs/compatibility.md).

    Args:
        None: the constructor takes no arguments; set the options as attributes.

    Returns:
        ExecutionStrategy: an options object for ``with_data_parallel`` / ``ParallelExecutor``.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> strategy = fluid.ExecutionStrategy()
        >>> strategy.num_threads = 2
        >>> strategy.num_iteration_per_drop_scope = 10
        >>> compiled = fluid.CompiledProgram(fluid.Program()).with_data_parallel(exec_strategy=strategy)
    """


class CompiledProgram:
    """Wraps a Program; ``exe.run(compiled, ...)`` runs ``compiled._program`` on the CPU.

    Args:
        program_or_graph (Program): the program to run.
        build_strategy (BuildStrategy | None): fluid's build options.

    Returns:
        CompiledProgram: the wrapper, to pass to ``Executor.run`` in place of the program.

    Raises:
        TypeError: ``program_or_graph`` is not a Program.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup), fluid.unique_name.guard():
        ...     x = fluid.data("x", [-1, 2])
        ...     pred = fluid.layers.fc(x, size=1, param_attr=fluid.ParamAttr(
        ...         name="w", initializer=fluid.initializer.Constant(1.0)), bias_attr=False)
        ...     loss = fluid.layers.mean(pred)
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        >>> compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> exe.run(compiled, feed={"x": np.ones((2, 2), "float32")}, fetch_list=[loss])[0]
        array([2.], dtype=float32)
    """

    def __init__(self, program_or_graph: Program, build_strategy: Optional[BuildStrategy] = None):
        if not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram expects a Program, got {type(program_or_graph)}")
        self._program = program_or_graph
        self._build_strategy = build_strategy
        self._data_parallel = False
        self._loss_name: Optional[str] = None
        # with_data_parallel on several CPU places in one process (executor/places.py)
        self._local_places = 1
        self._split_cache: Optional[Tuple[int, Any]] = None
        self._place_scopes: "weakref.WeakKeyDictionary[Any, Dict[int, Any]]" = \
            weakref.WeakKeyDictionary()

    def with_data_parallel(self, loss_name: Optional[str] = None,
                           build_strategy: Optional[BuildStrategy] = None,
                           exec_strategy: Optional[ExecutionStrategy] = None,
                           share_vars_from: Any = None, places: Any = None) -> "CompiledProgram":
        """Data parallel over the processes of an MPI launch (``mpirun -n N`` or
        ``python -m fluidlite.distributed.launch``): the compiled program is a copy of the
        program with every gradient all-reduced and scaled by 1/N right after the backward ops
        (before clip, regularization and update; the Program you built is not changed), and the
        parameters in the global scope are broadcast from rank 0 now — so run the startup
        program first, as fluid scripts do. Each process feeds its own shard. Alone (one
        process) nothing changes; across processes ``places`` is ignored (one CPU each). The build
        strategy's ``fuse_all_reduce_ops`` (default on) / ``fuse_grad_size_in_MB`` (32) pack
        small gradients into buckets and ``overlap_allreduce`` (default on; False: blocking
        all-reduces after backward) overlaps them with backward
        (``data_parallel.insert_allreduce``).

        In one process, ``places`` (a list) or the ``CPU_NUM`` environment variable sets how
        many CPU places share each batch (default 1): ``exe.run`` then takes one feed dict per
        place or one dict to split, averages the places' gradients and merges fetched values
        along dim 0 (``fluidlite.executor.places``).

        Args:
            loss_name (str | None): the loss variable's name (recorded, as fluid). Default None.
            build_strategy (BuildStrategy | None): overrides the constructor's; see BuildStrategy
                for the options honoured. Default None.
            exec_strategy (ExecutionStrategy | None): fluid's executor options; they do not change
                results. Default None.
            share_vars_from (CompiledProgram | None): a data-parallel CompiledProgram whose
                per-place scopes this one shares (e.g. a test program sharing the training
                parameters). Default None.
            places (list | int | None): in one process, the CPU places sharing a batch (their number
                matters); None reads ``CPU_NUM`` (default 1). Default None.

        Returns:
            CompiledProgram: ``self``, now data parallel.

        Raises:
            ValueError: ``gradient_scale_strategy`` is not ``CoeffNumDevice``; ``places`` /
                ``CPU_NUM`` give fewer than one place or ``CPU_NUM`` is not an integer.
            TypeError: ``share_vars_from`` is not a CompiledProgram compiled with
                ``with_data_parallel``.
            RuntimeError: across processes, a parameter is not in the global scope yet (run the
                startup program first).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> compiled = fluid.CompiledProgram(main).with_data_parallel(
            ...     loss_name=loss.name, places=fluid.cpu_places(1))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> exe.run(compiled, feed={"x": np.ones((4, 2), "float32")}, fetch_list=[loss])[0].shape
            (1,)
        """
        from .distributed import comm, data_parallel
        bs = build_strategy or self._build_strategy
        scale_strategy = getattr(bs, "gradient_scale_strategy",
                                 _GradientScaleStrategy.CoeffNumDevice)
        if scale_strategy != _GradientScaleStrategy.CoeffNumDevice:
            raise ValueError(f"with_data_parallel: build_strategy.gradient_scale_strategy="
                             f"{_GradientScaleStrategy(scale_strategy).name} is not supported; "
                             f"fluidlite averages the gradients over the processes "
                             f"(CoeffNumDevice) -- scale the loss yourself for another "
                             f"strategy")
        if share_vars_from is not None:
            if not isinstance(share_vars_from, CompiledProgram) or \
                    not share_vars_from._data_parallel:
                raise TypeError(f"with_data_parallel: share_vars_from must be a CompiledProgram "
                                f"compiled with with_data_parallel, received "
                                f"{type(share_vars_from).__name__}")
            self._place_scopes = share_vars_from._place_scopes   # the same per-place scopes
        world = comm.world()
        if world.size == 1 or self._data_parallel:
            if not self._data_parallel:
                self._local_places = _cpu_places(places)
            self._data_parallel = True
            self._loss_name = loss_name
            return self
        program = self._program.clone()
        fuse = getattr(bs, "fuse_all_reduce_ops", True) is not False
        bucket = int(getattr(bs, "fuse_grad_size_in_MB", 32) * (1 << 20)) if fuse else 0
        # issue 17: build_strategy.overlap_allreduce = False keeps the blocking all-reduce
        pairs = data_parallel.insert_before_optimize(
            program, world, bucket_bytes=bucket,
            overlap=getattr(bs, "overlap_allreduce", None))
        _broadcast_parameters([p for p, _ in pairs], world)
        self._program = program
        self._data_parallel = True
        self._loss_name = loss_name
        return self


    def _split(self) -> Any:
        """(compute, apply, gradient names) of the program for several places, rebuilt when
        the program changed (``executor.places.split_program``)."""
        from .executor import places
        version = self._program.version
        if self._split_cache is None or self._split_cache[0] != version:
            self._split_cache = (version, places.split_program(self._program))
        return self._split_cache[1]


def _cpu_places(places: Any) -> int:
    """How many CPU places data parallel uses in one process: ``len(places)`` when given (one
    place alone counts as ``[place]``, as fluid 1.8 wraps it), else ``CPU_NUM`` (fluid 1.8),
    else 1 (fluid used every core; the number of places changes the numbers, so fluidlite does
    not take it from the machine)."""
    if places is not None and not isinstance(places, (list, tuple, int, str)):
        places = [places]
    if places is not None:
        n = len(places) if isinstance(places, (list, tuple)) else int(places)
    else:
        raw = os.environ.get("CPU_NUM", "1")
        try:
            n = int(raw)
        except ValueError:
            raise ValueError(f"CPU_NUM must be a positive integer, got {raw!r}") from None
    if n < 1:
        raise ValueError(f"with_data_parallel needs at least one place, got {n}")
    return n


def _broadcast_parameters(params: Any, world: Any) -> None:
    """Rank 0's values of ``params`` in the global scope, on every rank (a
    program of ``c_broadcast`` ops run by an Executor)."""
    from .core import rewrite
    from .core.ir import OpRole
    from .core.scope import CPUPlace, global_scope
    from .executor import Executor
    scope = global_scope()
    missing = [p.name for p in params if scope.find_var(p.name) is None]
    if missing:
        raise RuntimeError(f"with_data_parallel: parameters {missing[:3]} are not initialized: "
                           f"run the startup program before compiling with data parallel "
                           f"(rank 0's parameters are broadcast to every rank)")
    prog = Program()
    block = prog.global_block()
    with rewrite.role(prog, OpRole.Forward, name_scope="data_parallel"):
        for p in params:
            v = block.create_var(name=p.name, shape=p.shape, dtype=p.dtype, persistable=True)
            rewrite.append(block, "c_broadcast", {"X": v}, {"Out": v}, {"root": 0})
    Executor(CPUPlace()).run(prog, scope=scope)


class ParallelExecutor:
    """fluid's ParallelExecutor: ``CompiledProgram(main_program, build_strategy)
    .with_data_parallel(loss_name, exec_strategy=..., share_vars_from=...)`` run by one CPU
    ``Executor`` on ``scope`` (default: the global scope, or ``share_vars_from``'s).

    Args:
        use_cuda (bool): must be False (fluidlite runs on the CPU).
        loss_name (str): the loss, as fluid.
        main_program (Program): default the default main program.
        share_vars_from (ParallelExecutor): run on that executor's scope (its parameters).
        exec_strategy, build_strategy: see ``ExecutionStrategy`` / ``BuildStrategy``.
        num_trainers (int), trainer_id (int): the processes of the launch; they must agree
            with it (``mpirun -n num_trainers``; this process is rank ``trainer_id``).
        scope (Scope): where the variables live.

    Returns:
        ParallelExecutor: the executor; call ``run`` once per step.

    Raises:
        ValueError: ``use_cuda`` is True, or ``num_trainers`` / ``trainer_id`` disagree with the
            launch; also as ``with_data_parallel`` (strategy, ``CPU_NUM``).
        TypeError: ``main_program`` is not a Program, or ``share_vars_from`` is not a
            ParallelExecutor.
        RuntimeError: across processes, the parameters are not initialized yet.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
        ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
        >>> fluid.Executor(fluid.CPUPlace()).run(startup)
        []
        >>> pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
        >>> pe.run(fetch_list=[loss.name], feed={"x": np.ones((4, 2), "float32")})[0].shape
        (1,)
    """

    def __init__(self, use_cuda: bool = False, loss_name: Optional[str] = None,
                 main_program: Optional[Program] = None, share_vars_from: Any = None,
                 exec_strategy: Optional[ExecutionStrategy] = None,
                 build_strategy: Optional[BuildStrategy] = None, num_trainers: int = 1,
                 trainer_id: int = 0, scope: Any = None) -> None:
        from .core.ir import default_main_program
        from .core.scope import CPUPlace, global_scope
        from .distributed import comm
        from .executor import Executor
        if use_cuda:
            raise ValueError("ParallelExecutor(use_cuda=True): fluidlite runs on the CPU; pass "
                             "use_cuda=False")
        program = main_program if main_program is not None else default_main_program()
        if not isinstance(program, Program):
            raise TypeError(f"ParallelExecutor expects main_program to be a Program, got "
                            f"{type(program)}")
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise TypeError(f"ParallelExecutor: share_vars_from must be a ParallelExecutor, "
                            f"received {type(share_vars_from).__name__}")
        world = comm.world()
        if (num_trainers, trainer_id) != (1, 0) and \
                (num_trainers != world.size or trainer_id != world.rank):
            raise ValueError(f"ParallelExecutor: num_trainers={num_trainers}, "
                             f"trainer_id={trainer_id}, but this process is rank {world.rank} "
                             f"of a launch of {world.size}; start the trainers with "
                             f"python -m fluidlite.distributed.launch --nproc_per_node "
                             f"{num_trainers} (or mpirun -n {num_trainers})")
        if scope is None:
            scope = share_vars_from._scope if share_vars_from is not None else global_scope()
        self._scope = scope
        self._program = program
        self._compiled = CompiledProgram(program, build_strategy).with_data_parallel(
            loss_name=loss_name, exec_strategy=exec_strategy,
            share_vars_from=share_vars_from._compiled if share_vars_from is not None else None)
        self._exe = Executor(CPUPlace())
        self.loss_name = loss_name

    def run(self, fetch_list: Any, feed: Any = None, feed_dict: Any = None,
            return_numpy: bool = True) -> Any:
        """Run one step of the data-parallel program: ``feed`` (or fluid's ``feed_dict``) and
        ``fetch_list`` as for ``Executor.run``, in the executor's own scope.

        Args:
            fetch_list (list[Variable | str]): what to fetch, as ``Executor.run``.
            feed (dict | list[dict] | None): ``{name: array}``, or one dict per CPU place. Default
                None.
            feed_dict (dict | None): fluid's older name for ``feed``, used when ``feed`` is None.
                Default None.
            return_numpy (bool): fetch numpy arrays (True) or LoDTensors. Default True.

        Returns:
            list: one fetched value per entry of ``fetch_list`` (merged along dim 0 across places).

        Raises:
            ValueError: an unknown feed or fetch name, or a feed of the wrong shape or dtype (as
                ``Executor.run``).
            RuntimeError: a persistable variable is not initialized (run the startup program).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> _ = fluid.Executor(fluid.CPUPlace()).run(startup)
            >>> pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
            >>> pe.run(fetch_list=[loss.name], feed={"x": np.ones((4, 2), "float32")})[0].shape
            (1,)
        """
        if feed is None and feed_dict is not None:
            feed = feed_dict
        return self._exe.run(self._compiled, feed=feed, fetch_list=fetch_list,
                             scope=self._scope, return_numpy=return_numpy)

    @property
    def device_count(self) -> int:
        return 1

    def drop_local_exe_scopes(self) -> None:
        """Nothing to drop: runs keep no per-device scopes.

        Args:
            None: this method takes no arguments.

        Returns:
            None.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
            ...     _ = fluid.optimizer.SGD(0.1).minimize(loss)
            >>> _ = fluid.Executor(fluid.CPUPlace()).run(startup)
            >>> pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
            >>> _ = pe.run(fetch_list=[loss.name], feed={"x": np.ones((4, 2), "float32")})
            >>> pe.drop_local_exe_scopes()          # free the per-run temporaries
        """
