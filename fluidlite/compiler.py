"""``CompiledProgram`` and strategies: accepted and run single-device on the CPU."""
from __future__ import annotations

from typing import Any, Optional

from .core.ir import Program

__all__ = ["CompiledProgram", "BuildStrategy", "ExecutionStrategy", "ParallelExecutor"]


class BuildStrategy:
    """Accepted for compatibility; attributes may be set freely and are ignored."""


class ExecutionStrategy:
    """Accepted for compatibility; attributes may be set freely and are ignored."""


class CompiledProgram:
    """Wraps a Program; ``exe.run(compiled, ...)`` runs ``compiled._program`` on the CPU."""

    def __init__(self, program_or_graph: Program, build_strategy: Optional[BuildStrategy] = None):
        if not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram expects a Program, got {type(program_or_graph)}")
        self._program = program_or_graph
        self._build_strategy = build_strategy

    def with_data_parallel(self, loss_name: Optional[str] = None,
                           build_strategy: Optional[BuildStrategy] = None,
                           exec_strategy: Optional[ExecutionStrategy] = None,
                           share_vars_from: Any = None, places: Any = None) -> "CompiledProgram":
        return self


class ParallelExecutor:
    """fluid's ParallelExecutor, run on one CPU device: ``run(fetch_list, feed=None,
    feed_dict=None, return_numpy=True)`` runs ``main_program`` with an ``Executor``."""

    def __init__(self, use_cuda: bool = False, loss_name: Optional[str] = None,
                 main_program: Optional[Program] = None, share_vars_from: Any = None,
                 exec_strategy: Optional[ExecutionStrategy] = None,
                 build_strategy: Optional[BuildStrategy] = None, num_trainers: int = 1,
                 trainer_id: int = 0, scope: Any = None) -> None:
        from .core.ir import default_main_program
        from .core.scope import CPUPlace, global_scope
        from .executor import Executor
        self._program = main_program if main_program is not None else default_main_program()
        if not isinstance(self._program, Program):
            raise TypeError(f"ParallelExecutor expects main_program to be a Program, got "
                            f"{type(self._program)}")
        self._scope = scope if scope is not None else global_scope()
        self._exe = Executor(CPUPlace())
        self.loss_name = loss_name

    def run(self, fetch_list: Any, feed: Any = None, feed_dict: Any = None,
            return_numpy: bool = True) -> Any:
        if feed is None and feed_dict is not None:
            feed = feed_dict
        return self._exe.run(self._program, feed=feed, fetch_list=fetch_list, scope=self._scope,
                             return_numpy=return_numpy)

    @property
    def device_count(self) -> int:
        return 1

    def drop_local_exe_scopes(self) -> None:
        """Nothing to drop: runs keep no per-device scopes."""
