"""fluid 1.8's inference tensors: ``PaddleDType``, ``PaddleBuf``, ``PaddleTensor`` (the
``predictor.run`` API) and ``ZeroCopyTensor`` (``get_input_tensor`` / ``zero_copy_run``).

They mirror ``paddle/fluid/pybind/inference_api.cc``: a ``PaddleTensor`` holds ``name``,
``shape``, ``dtype``, ``lod`` and ``data`` (a ``PaddleBuf``); ``as_ndarray()`` gives the values.
Here a buffer holds a NumPy array instead of raw bytes, so nothing is reinterpreted.
"""
from __future__ import annotations

import enum
from typing import Any, List, Optional, Sequence

import numpy as np

__all__ = ["PaddleDType", "PaddlePlace", "PaddleBuf", "PaddleTensor", "ZeroCopyTensor",
           "paddle_dtype_size"]


class PaddleDType(enum.IntEnum):
    """Element types of inference tensors (fluid 1.8's ``PaddleDType``; 1.8 has the first
    four, later Paddle adds ``FLOAT16``, ``INT8`` and ``BOOL``, accepted here too).

    Args:
        value (int): the member's number (``PaddleDType(0)`` is ``FLOAT32``); members are usually
            named directly (``PaddleDType.INT64``).

    Returns:
        PaddleDType: the enum member.

    Raises:
        ValueError: ``value`` is not a member's number (``PaddleDType(9)``).

    Example:
        >>> import numpy as np
        >>> from fluidlite.inference import PaddleDType
        >>> PaddleDType.from_numpy(np.float32)
        <PaddleDType.FLOAT32: 0>
    """
    FLOAT32 = 0
    INT64 = 1
    INT32 = 2
    UINT8 = 3
    INT8 = 4
    FLOAT16 = 5
    BOOL = 6

    @classmethod
    def from_numpy(cls, dtype: Any) -> "PaddleDType":
        """The ``PaddleDType`` of a NumPy dtype; ``TypeError`` for any other."""
        d = np.dtype(dtype)
        for member, np_name in _NUMPY.items():
            if np.dtype(np_name) == d:
                return member
        raise TypeError(f"PaddleTensor does not support dtype {d} (supported: "
                        f"{', '.join(sorted(set(_NUMPY.values())))})")

    def numpy(self) -> np.dtype:
        """The NumPy dtype of this element type."""
        return np.dtype(_NUMPY[self])


_NUMPY = {PaddleDType.FLOAT32: "float32", PaddleDType.INT64: "int64",
          PaddleDType.INT32: "int32", PaddleDType.UINT8: "uint8", PaddleDType.INT8: "int8",
          PaddleDType.FLOAT16: "float16", PaddleDType.BOOL: "bool"}


def paddle_dtype_size(dtype: Any) -> int:
    """Bytes per element of a ``PaddleDType`` (fluid's ``paddle_dtype_size``).

    Args:
        dtype: a ``PaddleDType`` member (or its number).

    Returns:
        int: 4 for FLOAT32 and INT32, 8 for INT64, 2 for FLOAT16, 1 for UINT8, INT8 and BOOL.

    Raises:
        ValueError: ``dtype`` is not a PaddleDType's number.

    Example:
        >>> from fluidlite.inference import PaddleDType, paddle_dtype_size
        >>> paddle_dtype_size(PaddleDType.INT64)
        8
    """
    return PaddleDType(dtype).numpy().itemsize


class PaddlePlace(enum.IntEnum):
    """Where a tensor lives (fluid 1.8's ``PaddlePlace``): fluidlite's are all on the ``CPU``.

    Args:
        value (int): the member's number (``PaddlePlace(0)`` is ``CPU``).

    Returns:
        PaddlePlace: the enum member.

    Raises:
        ValueError: ``value`` is not a member's number.

    Example:
        >>> from fluidlite.inference import PaddlePlace
        >>> PaddlePlace.CPU
        <PaddlePlace.CPU: 0>
    """
    UNK = -1
    CPU = 0
    GPU = 1


class PaddleBuf:
    """A flat buffer of values (fluid's ``PaddleBuf``), backed by a 1-D NumPy array.

    Args:
        data: an int (a zeroed float32 buffer of that many *bytes*, as 1.8's
            ``PaddleBuf(size_t)``), a list of floats, or a NumPy array (copied, flattened).

    Returns:
        PaddleBuf: the buffer (``length()`` bytes, ``float_data()`` etc. read it).

    Raises:
        ValueError: ``data`` is a negative int (a negative size).

    Example:
        >>> from fluidlite.inference import PaddleBuf
        >>> PaddleBuf([1.0, 2.0]).float_data()
        [1.0, 2.0]
    """

    def __init__(self, data: Any = 0) -> None:
        self._array = _flat(data)

    @classmethod
    def _sharing(cls, arr: np.ndarray) -> "PaddleBuf":
        """A buffer on ``arr``'s own memory when it is C-contiguous (else on a contiguous
        copy): ``PaddleTensor(data, copy=False)``."""
        buf = cls.__new__(cls)
        buf._array = np.ascontiguousarray(arr).reshape(-1)
        return buf

    def resize(self, length: int) -> None:
        """Resize to ``length`` bytes, keeping the element type (new values are zero)."""
        n = int(length) // max(self._array.itemsize, 1)
        out = np.zeros(n, self._array.dtype)
        k = min(n, self._array.size)
        out[:k] = self._array[:k]
        self._array = out

    def reset(self, data: Any) -> None:
        """Replace the contents with ``data`` (a list or array, copied)."""
        self._array = _flat(data)

    def empty(self) -> bool:
        """True when the buffer holds nothing."""
        return self._array.size == 0

    def length(self) -> int:
        """Size in bytes."""
        return int(self._array.nbytes)

    def tolist(self, dtype: str) -> List[Any]:
        """The values read as ``dtype`` (``"float32"``, ``"int32"`` or ``"int64"``)."""
        if dtype not in ("float32", "int32", "int64"):
            raise NotImplementedError("Unsupported data type. Now only supports INT32, INT64 "
                                      "and FLOAT32.")
        return self._array.astype(dtype).tolist()

    def float_data(self) -> List[float]:
        """The values as floats."""
        return self.tolist("float32")

    def int64_data(self) -> List[int]:
        """The values as int64."""
        return self.tolist("int64")

    def int32_data(self) -> List[int]:
        """The values as int32."""
        return self.tolist("int32")

    def __repr__(self) -> str:
        return f"PaddleBuf({self._array.size} x {self._array.dtype})"


def _flat(data: Any) -> np.ndarray:
    if isinstance(data, PaddleBuf):
        return data._array.copy()
    if isinstance(data, (int, np.integer)) and not isinstance(data, bool):
        return np.zeros(int(data) // 4, np.float32)
    arr = np.asarray(data)
    if arr.dtype == np.float64 and not isinstance(data, np.ndarray):
        arr = arr.astype(np.float32)        # a Python list of floats: 1.8 reads it as float
    return np.array(arr, copy=True).reshape(-1)


class PaddleTensor:
    """An input or output of ``predictor.run`` (fluid 1.8's ``PaddleTensor``).

    Args:
        data: a NumPy array (int32, int64, float32, ...); its shape and dtype fill ``shape``
            and ``dtype`` (float64 becomes float32, as fluid's binding converts it: models
            are float32). Omit it for an empty tensor to fill field by field.
        name: the feed variable it is for (matched by name when the config's
            ``switch_specify_input_names`` is on, by position otherwise).
        lod: the level-of-detail offsets (``[[0, 2, 5]]``) of a sequence input.
        copy: True (the default) copies ``data``; False shares its memory, so that later
            writes into the array are what ``run`` reads (fluid's zero-copy construction) --
            when ``data`` is a C-contiguous array of a PaddleDType's type; an array that must
            be converted first (float64, a strided view) is converted into a copy either way.

    Returns:
        PaddleTensor: the tensor; ``as_ndarray()`` gives its values back.

    Raises:
        TypeError: ``data``'s dtype is not one of PaddleDType's (e.g. strings or complex
            numbers), or a LoD offset is not a number.
        ValueError: a LoD offset is a string that is not an integer.

    Example:
        >>> import numpy as np
        >>> from fluidlite.inference import PaddleTensor
        >>> t = PaddleTensor(np.ones((2, 3), "float32"), name="x")
        >>> t.shape, t.dtype, float(t.as_ndarray().sum())
        ([2, 3], <PaddleDType.FLOAT32: 0>, 6.0)
    """

    def __init__(self, data: Optional[np.ndarray] = None, name: str = "",
                 lod: Optional[Sequence[Sequence[int]]] = None, copy: bool = True) -> None:
        self.name = name
        self.lod: List[List[int]] = [list(map(int, l)) for l in (lod or [])]
        if data is None:
            self.shape: List[int] = []
            self.dtype = PaddleDType.FLOAT32
            self.data = PaddleBuf(0)
        else:
            arr = np.asarray(data)
            if arr.dtype == np.float64:
                arr = arr.astype(np.float32)
            self.dtype = PaddleDType.from_numpy(arr.dtype)
            self.shape = [int(d) for d in arr.shape]
            self.data = PaddleBuf(arr) if copy else PaddleBuf._sharing(arr)

    def as_ndarray(self) -> np.ndarray:
        """The values as an array of ``shape`` and ``dtype`` (a copy)."""
        arr = self.data._array.astype(self.dtype.numpy(), copy=False)
        count = int(np.prod(self.shape)) if self.shape else arr.size
        if arr.size != count:
            raise ValueError(f"PaddleTensor '{self.name}': shape {self.shape} needs {count} "
                             f"values, its buffer holds {arr.size}")
        return arr.reshape(self.shape if self.shape else arr.shape).copy()

    def __repr__(self) -> str:
        return (f"PaddleTensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype.name}, "
                f"lod={self.lod})")


class ZeroCopyTensor:
    """A named input or output slot of a predictor (fluid 1.8's ``ZeroCopyTensor``), from
    ``predictor.get_input_tensor(name)`` / ``get_output_tensor(name)``.

    Inputs: ``reshape`` (optional), ``copy_from_cpu(array)``, ``set_lod``; then
    ``predictor.zero_copy_run()``; outputs: ``copy_to_cpu()``, ``shape()``, ``lod()``.
    "Zero copy" is Paddle's name: here the input array is copied once on the way in (so the
    caller may reuse its buffer) and ``copy_to_cpu`` returns a fresh array.

    Args:
        name (str): the feed or fetch variable the slot is bound to.
        slots (dict): the predictor's input or output slot table (internal).
        is_input (bool): an input slot (``copy_from_cpu``) rather than an output (``copy_to_cpu``).

    Returns:
        ZeroCopyTensor: the slot; get it from ``predictor.get_input_tensor(name)`` /
        ``get_output_tensor(name)`` rather than building it.

    Raises:
        None: the constructor does not raise (its methods raise RuntimeError when used on the wrong
            kind of slot).

    Example:
        >>> import numpy as np, tempfile
        >>> import fluidlite as fluid
        >>> from fluidlite.inference import AnalysisConfig, create_paddle_predictor, PaddleTensor
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 4])
        ...     y = fluid.layers.fc(x, size=3, act="softmax")
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> model_dir = tempfile.mkdtemp()
        >>> _ = fluid.io.save_inference_model(model_dir, ["x"], [y], exe, main_program=main)
        >>> predictor = create_paddle_predictor(AnalysisConfig(model_dir))
        >>> t = predictor.get_input_tensor("x")
        >>> t.copy_from_cpu(np.ones((1, 4), "float32"))
        >>> predictor.zero_copy_run()
        >>> out = predictor.get_output_tensor(predictor.get_output_names()[0]).copy_to_cpu()
        >>> out.shape
        (1, 3)
    """

    def __init__(self, name: str, slots: dict, is_input: bool) -> None:
        self._name, self._slots, self._input = name, slots, is_input
        self._shape: Optional[List[int]] = None

    @property
    def name(self) -> str:
        """The variable this tensor is bound to (also callable, as 1.8's ``name()``)."""
        return _CallableStr(self._name)

    def reshape(self, shape: Sequence[int]) -> None:
        """Declare the shape of the next ``copy_from_cpu`` (checked there)."""
        if not self._input:
            raise RuntimeError(f"ZeroCopyTensor '{self._name}' is an output: it cannot be "
                               f"reshaped")
        self._shape = [int(d) for d in shape]

    def copy_from_cpu(self, data: np.ndarray) -> None:
        """Set the input's values (a copy of ``data``; its dtype is kept)."""
        if not self._input:
            raise RuntimeError(f"ZeroCopyTensor '{self._name}' is an output: copy_from_cpu is "
                               f"for inputs")
        arr = np.array(data, copy=True, order="C")
        if self._shape is not None and int(np.prod(self._shape)) == arr.size:
            arr = arr.reshape(self._shape)
        elif self._shape is not None:
            raise ValueError(f"ZeroCopyTensor '{self._name}': reshape({self._shape}) does not "
                             f"match {arr.size} values")
        lod = self._slots.get(self._name, (None, []))[1]
        self._slots[self._name] = (arr, lod)

    def copy_to_cpu(self) -> np.ndarray:
        """The values (a fresh array): an output after ``zero_copy_run``, or an input."""
        arr = self._slots.get(self._name, (None, []))[0]
        if arr is None:
            raise RuntimeError(f"ZeroCopyTensor '{self._name}' has no value yet"
                               + ("" if self._input else ": call predictor.zero_copy_run()"))
        return np.array(arr, copy=True)

    def shape(self) -> List[int]:
        """The current shape (the ``reshape`` one before any data)."""
        arr = self._slots.get(self._name, (None, []))[0]
        if arr is None:
            return list(self._shape or [])
        return [int(d) for d in np.shape(arr)]

    def set_lod(self, lod: Sequence[Sequence[int]]) -> None:
        """Set the input's LoD (sequence offsets)."""
        arr = self._slots.get(self._name, (None, []))[0]
        self._slots[self._name] = (arr, [list(map(int, l)) for l in lod])

    def lod(self) -> List[List[int]]:
        """The LoD of the value (empty for a plain tensor)."""
        return [list(l) for l in self._slots.get(self._name, (None, []))[1]]

    def type(self) -> PaddleDType:
        """The element type of the current value."""
        arr = self._slots.get(self._name, (None, []))[0]
        if arr is None:
            raise RuntimeError(f"ZeroCopyTensor '{self._name}' has no value yet")
        return PaddleDType.from_numpy(np.asarray(arr).dtype)

    def __repr__(self) -> str:
        return f"ZeroCopyTensor({self._name!r}, {'input' if self._input else 'output'})"


class _CallableStr(str):
    """A str that also answers ``()``: 1.8's ``tensor.name()`` and the attribute form."""

    def __call__(self) -> str:
        return str(self)
