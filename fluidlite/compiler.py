"""``CompiledProgram`` and strategies: accepted and run single-device on the CPU."""
from __future__ import annotations

from typing import Any, Optional

from .core.ir import Program

__all__ = ["CompiledProgram", "BuildStrategy", "ExecutionStrategy"]


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
