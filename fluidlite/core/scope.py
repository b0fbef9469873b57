"""Run-time storage: ``Scope`` (name -> variable holder), ``LoDTensor`` and places."""
from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any, Dict, Iterator, List, Optional, Sequence

import numpy as np

from .dtypes import VarType, convert_np_dtype_to_dtype_
from .selected_rows import SelectedRows

_log = logging.getLogger("fluidlite")


# -- places -----------------------------------------------------------------------------------
class CPUPlace:
    """The CPU device. fluidlite runs everything on the CPU; ``CUDAPlace`` and the other
    places are accepted for fluid's signatures and mean the CPU too.

    Args:
        None: the constructor takes no arguments.

    Returns:
        CPUPlace: the CPU place (all CPUPlaces compare equal).

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> exe = fluid.Executor(fluid.CPUPlace())   # fluidlite runs everything on the CPU
        >>> fluid.CPUPlace()
        CPUPlace
    """
    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CPUPlace)

    def __hash__(self) -> int:
        return hash("CPUPlace")

    def __repr__(self) -> str:
        return "CPUPlace"


class CUDAPlace:
    """Accepted for compatibility; programs run on the CPU (a warning is logged once).

    Args:
        device_id (int): the GPU id fluid would use; kept for ``repr`` and equality only. Default 0.

    Returns:
        CUDAPlace: a place that runs programs on the CPU.

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> exe = fluid.Executor(fluid.CUDAPlace(0))       # accepted; runs on the CPU
        >>> fluid.CUDAPlace(0)
        CUDAPlace(0)
    """

    def __init__(self, device_id: int = 0) -> None:
        self.device_id = device_id

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, CUDAPlace) and other.device_id == self.device_id

    def __hash__(self) -> int:
        return hash(("CUDAPlace", self.device_id))

    def __repr__(self) -> str:
        return f"CUDAPlace({self.device_id})"


class CUDAPinnedPlace(CPUPlace):
    """fluid's pinned host memory place; accepted so that scripts run, and means the CPU.

    Args:
        None: the constructor takes no arguments.

    Returns:
        CUDAPinnedPlace: a CPUPlace subclass (it compares equal to ``CPUPlace()``).

    Raises:
        None: the constructor does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.CUDAPinnedPlace()                       # accepted; the CPU
        CUDAPinnedPlace
    """
    def __repr__(self) -> str:
        return "CUDAPinnedPlace"


def is_compiled_with_cuda() -> bool:
    """False: fluidlite runs on the CPU (fluid scripts use this to pick their place).

    Args:
        None: this function takes no arguments.

    Returns:
        bool: always False.

    Raises:
        None: this function does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.is_compiled_with_cuda()       # fluidlite runs on the CPU only
        False
    """
    return False


def cpu_places(device_count: Optional[int] = None) -> List[CPUPlace]:
    """``device_count`` CPUPlaces: fluid's list of places for data-parallel loaders; every
    place is the CPU here. Without ``device_count``, the ``CPU_NUM`` environment variable
    gives the count, as in fluid 1.8 (1 when unset: fluid took the machine's cores, but the
    number of places changes the numbers, so fluidlite does not -- as ``with_data_parallel``).

    Args:
        device_count (int, optional): how many places; None reads ``CPU_NUM``; 0 gives one.
            Default None.

    Returns:
        list[CPUPlace]: ``device_count`` CPU places.

    Raises:
        TypeError: ``device_count`` is not an int (e.g. a str or float).
        ValueError: ``device_count`` is None and ``CPU_NUM`` is not a positive integer.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.cpu_places(2)
        [CPUPlace, CPUPlace]
    """
    if device_count is None:
        raw = os.environ.get("CPU_NUM", "1")
        try:
            device_count = int(raw)
        except ValueError:
            device_count = 0
        if device_count < 1:
            raise ValueError(f"cpu_places: the CPU_NUM environment variable must be a positive "
                             f"integer, got {raw!r}; unset it or pass device_count") from None
    return [CPUPlace() for _ in range(device_count or 1)]


def cuda_places(device_ids: Optional[Sequence[int]] = None) -> List[CUDAPlace]:
    """fluid's list of CUDA places (``device_ids``, default ``[0]``). There is no GPU here:
    the places are accepted so that scripts run, and mean the CPU.

    Args:
        device_ids (list[int], optional): the device ids. Default None (``[0]``).

    Returns:
        list[CUDAPlace]: one place per id.

    Raises:
        TypeError: ``device_ids`` is not iterable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> fluid.cuda_places()                 # accepted for fluid's scripts; the place is the CPU
        [CUDAPlace(0)]
    """
    return [CUDAPlace(i) for i in (device_ids if device_ids is not None else [0])]


# -- tensors ----------------------------------------------------------------------------------
class LoDTensor:
    """A numpy array plus fluid's level-of-detail (sequence offset) metadata.

    Args:
        array (numpy.ndarray | None): the initial value (stored as given, not copied); None leaves
            the tensor uninitialized. Default None.
        lod (list[list[int]] | None): initial level offsets, e.g. ``[[0, 2, 5]]``. Default None (no
            LoD).

    Returns:
        LoDTensor: the tensor; ``set`` / ``set_recursive_sequence_lengths`` change it later.

    Raises:
        ValueError: an entry of ``lod`` is a string that is not an integer.
        TypeError: ``lod`` is not a nested sequence of numbers.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> t = fluid.LoDTensor()
        >>> t.set(np.ones((3, 2), "float32"), fluid.CPUPlace())
        >>> t.set_recursive_sequence_lengths([[1, 2]])
        >>> t.lod(), t.has_valid_recursive_sequence_lengths(), np.array(t).shape
        ([[0, 1, 3]], True, (3, 2))
    """

    __slots__ = ("_array", "_lod")

    def __init__(self, array: Optional[np.ndarray] = None, lod: Optional[List[List[int]]] = None):
        self._array = array
        self._lod = [[int(v) for v in l] for l in lod] if lod else []

    def set(self, array: Any, place: Any = None) -> None:
        """Store a copy of ``array`` (any array-like) as the tensor's value; ``place`` is accepted
        for fluid's signature (everything is on the CPU).

        Args:
            array (array-like): the new value; copied into a contiguous numpy array.
            place (Place, optional): fluid's target device; unused (everything is on the CPU).
                Default None.

        Returns:
            None.

        Raises:
            ValueError: ``array`` is ragged (numpy cannot build an array from it).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.array([[1, 2], [3, 4]], "int64"), fluid.CPUPlace())
            >>> t.shape(), np.array(t)
            ([2, 2], array([[1, 2],
                   [3, 4]]))
        """
        self._array = np.array(array, copy=True) if not isinstance(array, np.ndarray) else \
            np.ascontiguousarray(array).copy()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        if self._array is None:
            raise RuntimeError("The tensor is not initialized; run the program that "
                               "produces it (e.g. the startup program) first.")
        if dtype is not None:
            return self._array.astype(dtype)
        # numpy 2 passes copy=True for np.array(tensor) and trusts us to copy: scope buffers may
        # be updated in place by later runs, so a snapshot must not alias them
        return self._array.copy() if copy else self._array

    def shape(self) -> List[int]:
        """The tensor's shape as a list (``[]`` before a value is set).

        Args:
            None: this method takes no arguments.

        Returns:
            list[int]: the shape of the value, ``[]`` when uninitialized.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.create_lod_tensor(np.ones((4, 3), "float32"), [[1, 3]], fluid.CPUPlace())
            >>> t.shape()
            [4, 3]
        """
        return list(self._array.shape) if self._array is not None else []

    def _get_dims(self) -> List[int]:
        """fluid 1.8's private ``Tensor._get_dims()`` (pybind ``vectorize(dims())``): the shape
        as a list, as ``shape()``. Zoo scripts call it to reset metric states
        (PaddleRec/multi_task's ``set_zero``: ``np.zeros(param._get_dims())``).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.ones((2, 5), "int64"), fluid.CPUPlace())
            >>> t._get_dims()
            [2, 5]
        """
        return self.shape()

    def _set_dims(self, dims: Sequence[int]) -> None:
        """fluid 1.8's private ``Tensor._set_dims`` (``Resize``): give the tensor the shape
        ``dims``. A value with as many elements is reshaped; otherwise the tensor holds a new
        zero array of ``dims`` (fluid's memory is uninitialized there), float32 when it had no
        value yet.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.arange(6, dtype="int64"), fluid.CPUPlace())
            >>> t._set_dims([2, 3])
            >>> np.array(t).tolist()
            [[0, 1, 2], [3, 4, 5]]
        """
        dims = tuple(int(d) for d in dims)
        if any(d < 0 for d in dims):
            raise ValueError(f"LoDTensor._set_dims: dims must be >= 0, got {list(dims)}")
        arr = self._array
        if arr is not None and int(np.prod(dims)) == arr.size:
            self._array = arr.reshape(dims)
        else:
            self._array = np.zeros(dims, arr.dtype if arr is not None else np.float32)

    def _dtype(self) -> VarType:
        return convert_np_dtype_to_dtype_(self._array.dtype)


    def lod(self) -> List[List[int]]:
        """The offsets of each level, e.g. ``[[0, 2, 5]]`` for two sequences of 2 and 3 rows.

        Args:
            None: this method takes no arguments.

        Returns:
            list[list[int]]: a copy of the offsets of each level (``[]`` without LoD).

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.create_lod_tensor(np.ones((4, 3), "float32"), [[1, 3]], fluid.CPUPlace())
            >>> t.lod()
            [[0, 1, 4]]
        """
        return [list(l) for l in self._lod]

    def set_lod(self, lod: Any) -> None:
        """Set the offsets (any nested sequence of ints, numpy arrays included).

        Args:
            lod (list[list[int]]): the offsets of each level, e.g. ``[[0, 2, 5]]``; numpy arrays
                (1-D per level or one 2-D array) are accepted.

        Returns:
            None.

        Raises:
            TypeError: ``lod`` is not a list of 1-D levels, or an offset is not a number.
            ValueError: an offset is a string that is not an integer.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.ones((5, 1), "float32"), fluid.CPUPlace())
            >>> t.set_lod([[0, 2, 5]])                           # offsets
            >>> t.recursive_sequence_lengths()
            [[2, 3]]
        """
        self._lod = [[int(v) for v in level] for level in _levels(lod, "lod")]

    def recursive_sequence_lengths(self) -> List[List[int]]:
        """The sequence lengths of each level, e.g. ``[[2, 3]]``.

        Args:
            None: this method takes no arguments.

        Returns:
            list[list[int]]: the lengths of each level, ``offsets[i + 1] - offsets[i]``.

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.create_lod_tensor(np.ones((4, 3), "float32"), [[1, 3]], fluid.CPUPlace())
            >>> t.recursive_sequence_lengths()
            [[1, 3]]
        """
        return [[b - a for a, b in zip(level[:-1], level[1:])] for level in self._lod]

    def set_recursive_sequence_lengths(self, recursive_sequence_lengths: Any) -> None:
        """Set the LoD from sequence lengths (lists, tuples or numpy arrays, nested).

        Args:
            recursive_sequence_lengths (list[list[int]]): the sequence lengths of each level, e.g.
                ``[[2, 3]]``; numpy arrays are accepted.

        Returns:
            None.

        Raises:
            TypeError: the argument is not a list of 1-D levels, or a length is not a number.
            ValueError: a length is a string that is not an integer.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.arange(6, dtype="float32").reshape(6, 1), fluid.CPUPlace())
            >>> t.set_recursive_sequence_lengths([[2, 4]])       # two sequences: rows 0-1 and 2-5
            >>> t.recursive_sequence_lengths(), t.lod()
            ([[2, 4]], [[0, 2, 6]])
        """
        lod = []
        for level in _levels(recursive_sequence_lengths, "recursive_sequence_lengths"):
            offsets = [0]
            for n in level:
                offsets.append(offsets[-1] + int(n))
            lod.append(offsets)
        self._lod = lod

    def has_valid_recursive_sequence_lengths(self) -> bool:
        """Offsets start at 0 and never decrease, each level's last offset is the number of
        sequences of the next level, and the last level covers exactly the rows.

        Args:
            None: this method takes no arguments.

        Returns:
            bool: True when the LoD is consistent with itself and the rows (always True without
            LoD).

        Raises:
            None: this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> t = fluid.LoDTensor()
            >>> t.set(np.ones((4, 1), "float32"), fluid.CPUPlace())
            >>> t.set_recursive_sequence_lengths([[1, 2]])       # covers 3 rows, the tensor has 4
            >>> t.has_valid_recursive_sequence_lengths()
            False
        """
        if not self._lod:
            return True
        n = self._array.shape[0] if self._array is not None and self._array.ndim else 0
        for level in self._lod:
            if not level or level[0] != 0 or any(b < a for a, b in zip(level[:-1], level[1:])):
                return False
        for upper, lower in zip(self._lod[:-1], self._lod[1:]):
            if upper[-1] != len(lower) - 1:
                return False
        return self._lod[-1][-1] == n

    def __repr__(self) -> str:
        return f"LoDTensor(shape={self.shape()}, lod={self._lod})\n{self._array!r}"


def _levels(value: Any, what: str) -> List[Any]:
    """A nested sequence of levels (lists, tuples, numpy arrays) as a list of 1-D sequences."""
    if isinstance(value, np.ndarray):
        value = [value] if value.ndim == 1 else list(value) if value.ndim == 2 else None
    if not isinstance(value, (list, tuple)) or not all(
            isinstance(level, (list, tuple, np.ndarray)) and np.ndim(level) == 1
            for level in value):
        raise TypeError(f"{what} must be a list of levels, each a list of ints, e.g. [[2, 3]]; "
                        f"got {value!r}")
    return list(value)


class SelectedRowsView:
    """fluid's ``core.SelectedRows`` as ``scope.var(name).get_selected_rows()`` returns it: the
    row indices and height of a sparse ``[height, D...]`` variable, whose value (``[len(rows),
    D...]``) is ``get_tensor()``. The variable stays a SelectedRows from the first
    ``get_selected_rows()`` on; ``fluidlite.op.Operator`` feeds it to ops as
    ``core.selected_rows.SelectedRows`` and stores a sparse result back through it.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> scope = fluid.core.Scope()
        >>> sr = scope.var("g").get_selected_rows()
        >>> sr.set_rows([0, 4]); sr.set_height(10)
        >>> sr.get_tensor().set(np.ones((2, 3), "float32"), fluid.CPUPlace())
        >>> sr.rows(), sr.height(), np.array(sr.get_tensor()).shape
        ([0, 4], 10, (2, 3))
    """

    __slots__ = ("_holder",)

    def __init__(self, holder: "_ScopeVar") -> None:
        self._holder = holder

    def rows(self) -> List[int]:
        """The row indices (into the ``height`` rows), one per value row."""
        return list(self._holder._sparse_meta()[0])

    def set_rows(self, rows: Sequence[int]) -> None:
        """Set the row indices (a list of ints)."""
        self._holder._sparse_meta()[0] = [int(r) for r in rows]

    def height(self) -> int:
        """The height of the dense tensor the rows index into."""
        return self._holder._sparse_meta()[1]

    def set_height(self, height: int) -> None:
        """Set the dense height."""
        self._holder._sparse_meta()[1] = int(height)

    def get_tensor(self) -> LoDTensor:
        """The value tensor, ``[len(rows), D...]``."""
        self._holder._sparse_meta()
        return self._holder._tensor

    def sync_index(self) -> None:
        """fluid rebuilds its id -> row map here; fluidlite looks rows up when used, so there
        is nothing to rebuild."""

    def numel(self) -> int:
        """Elements of the value tensor."""
        self._holder._sparse_meta()
        arr = self._holder._tensor._array
        return 0 if arr is None else int(np.size(arr))


class _ScopeVar:
    """What ``scope.var(name)`` / ``find_var`` return: a holder of one tensor (or, once
    ``get_selected_rows()`` was asked, of a SelectedRows: ``_sparse`` = [rows, height] and the
    value in ``_tensor``)."""

    __slots__ = ("name", "_tensor", "_sparse")

    def __init__(self, name: str) -> None:
        self.name, self._tensor, self._sparse = name, LoDTensor(), None

    def get_tensor(self) -> LoDTensor:
        return self._tensor

    def get_selected_rows(self) -> SelectedRowsView:
        """The variable as fluid's SelectedRows (rows, height, value tensor); it stays one."""
        self._sparse_meta()
        return SelectedRowsView(self)

    def _sparse_meta(self) -> List[Any]:
        """[rows, height], unpacking a SelectedRows value an executor run stored."""
        arr = self._tensor._array
        if type(arr) is SelectedRows:
            self.set_selected_rows(arr)
        elif self._sparse is None:
            self._sparse = [[], 0]
        return self._sparse

    def set_selected_rows(self, value: SelectedRows) -> None:
        """Store a SelectedRows: its rows and height here, its value as the tensor."""
        self._sparse = [value.rows.tolist(), int(value.height)]
        self._tensor._array, self._tensor._lod = value.value, []

    def selected_rows(self) -> SelectedRows:
        """The stored SelectedRows (``get_selected_rows`` made this variable one)."""
        arr = self._tensor._array
        if type(arr) is SelectedRows:
            return arr
        if self._sparse is None or arr is None:
            raise ValueError(f"variable '{self.name}' holds no SelectedRows: set it with "
                             f"scope.var('{self.name}').get_selected_rows() (set_rows, "
                             f"set_height, get_tensor().set)")
        value = np.asarray(arr)
        if not self._sparse[0]:         # no rows: no content, whatever the tensor holds (fluid's
            value = value[:0]           # consumers skip an input whose rows() is empty)
        return SelectedRows(self._sparse[0], value, self._sparse[1])

    def is_selected_rows(self) -> bool:
        """True when the variable holds a SelectedRows (``get_selected_rows`` or a sparse
        value written by a run)."""
        return self._sparse is not None or type(self._tensor._array) is SelectedRows

    def is_initialized(self) -> bool:
        return self._tensor._array is not None

    def set(self, array: Any, place: Any = None) -> None:
        """Store a copy of ``array`` (fluid's ``tensor.set``)."""
        self._tensor.set(array, place)

    def get_array(self) -> Optional[np.ndarray]:
        """The stored array itself (no copy), or None when uninitialized."""
        return self._tensor._array

    def set_array(self, array: np.ndarray) -> None:
        """Store ``array`` itself (no copy): the caller hands over ownership."""
        self._tensor._array = array


class Scope:
    """Hierarchical name -> variable storage; lookups fall back to the parent scope.

    Variable holders are stable: ``find_var`` returns the same holder until the variable is
    erased, so callers may keep holders and re-resolve only when ``Scope.epoch()`` changed.
    A scope is not locked: one scope must not be changed by two threads at once.
    """

    def __init__(self, parent: Optional["Scope"] = None) -> None:
        self._vars: Dict[str, _ScopeVar] = {}
        self.parent = parent
        self._kids: List[Scope] = []

    def var(self, name: str) -> _ScopeVar:
        """Find ``name`` in this scope or create it here (never in a parent)."""
        v = self._vars.get(name)
        if v is None:
            v = self._vars[name] = _ScopeVar(name)
            _bump_epoch()
        return v

    def find_var(self, name: str) -> Optional[_ScopeVar]:
        scope: Optional[Scope] = self
        while scope is not None:
            v = scope._vars.get(name)
            if v is not None:
                return v
            scope = scope.parent
        return None


    def new_scope(self) -> "Scope":
        kid = Scope(self)
        self._kids.append(kid)
        return kid

    def drop_kids(self) -> None:
        self._kids.clear()

    def local_var_names(self) -> List[str]:
        return list(self._vars)

    def erase(self, names: Sequence[str]) -> None:
        for n in names:
            self._vars.pop(n, None)
        _bump_epoch()

    @staticmethod
    def epoch() -> int:
        """A number that changes whenever any scope gains or loses a variable: holders looked
        up at an older epoch may be stale."""
        return _epoch[0]

    # bulk access for the executor (one call per step instead of one per variable)
    @staticmethod
    def get_arrays(holders: Sequence[_ScopeVar]) -> List[Optional[np.ndarray]]:
        """``[h.get_array() for h in holders]``."""
        return [h._tensor._array for h in holders]

    @staticmethod
    def set_arrays(holders: Sequence[_ScopeVar], arrays: Sequence[np.ndarray]) -> None:
        """``h.set_array(a)`` for each pair (no copies)."""
        for h, a in zip(holders, arrays):
            h._tensor._array = a


_epoch = [0]
_epoch_lock = threading.Lock()


def _bump_epoch() -> None:
    with _epoch_lock:
        _epoch[0] += 1


_global_scope = Scope()


def global_scope() -> Scope:
    """The process-wide Scope that ``Executor.run`` reads and writes unless given ``scope=``
    (``scope_guard`` replaces it inside a with-block).

    Args:
        None: this function takes no arguments.

    Returns:
        Scope: the current global scope.

    Raises:
        None: this function does not raise.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2], "float32", name="gs_w",
        ...         default_initializer=fluid.initializer.Constant(3.0))
        >>> _ = fluid.Executor(fluid.CPUPlace()).run(startup)
        >>> np.array(fluid.global_scope().find_var("gs_w").get_tensor())
        array([3., 3.], dtype=float32)
    """
    return _global_scope


def _switch_scope(scope: Scope) -> Scope:
    global _global_scope
    prev, _global_scope = _global_scope, scope
    return prev


@contextlib.contextmanager
def scope_guard(scope: Scope) -> Iterator[None]:
    """Make ``scope`` the global scope inside the with-block.

    Args:
        scope (Scope): the scope ``Executor.run`` uses by default inside the block.

    Returns:
        contextmanager: a context manager yielding None; the previous global scope is restored
        on exit, also when the block raises.

    Raises:
        None: the guard itself does not check ``scope``; a non-Scope fails later, when an executor
            uses it.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     w = fluid.layers.create_parameter([2], "float32", name="sg_w",
        ...         default_initializer=fluid.initializer.Constant(1.0))
        >>> scope = fluid.Scope()
        >>> with fluid.scope_guard(scope):
        ...     _ = fluid.Executor(fluid.CPUPlace()).run(startup)
        >>> scope.find_var("sg_w") is not None, fluid.global_scope().find_var("sg_w") is None
        (True, True)
    """
    prev = _switch_scope(scope)
    try:
        yield
    finally:
        _switch_scope(prev)
