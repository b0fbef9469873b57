"""``fluid.executor``: Executor, scopes and the compiled plan."""
from ..core.scope import Scope, global_scope, scope_guard
from .executor import Executor, _fetch_var
from .plan import Plan

__all__ = ["Executor", "global_scope", "scope_guard", "Scope", "Plan", "_fetch_var"]
