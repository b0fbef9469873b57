"""``fluid.DataFeeder``: turn a minibatch of Python samples into a feed dict of LoDTensors, plus
fluid's argument checkers (``check_type``, ``check_dtype``, ``check_variable_and_dtype``) used by
the layer functions.

``DataFeeder(feed_list, place).feed(minibatch)``: ``minibatch`` is an iterable of samples, each
a tuple with one field per variable of ``feed_list``. Every field is converted with its
variable's dtype; fields of a ``lod_level > 0`` variable are nested sequences whose lengths
become the tensor's LoD. When the stacked batch has a different rank than the variable it is
reshaped to the variable's shape (e.g. 28x28 images fed to a ``[-1, 784]`` variable).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.dtypes import convert_dtype
from ..core.ir import Program, Variable, default_main_program
from ..core.scope import LoDTensor

__all__ = ["DataFeeder", "convert_dtype", "check_type", "check_dtype",
           "check_variable_and_dtype", "check_type_and_dtype"]


# -- argument checkers (fluid 1.8 data_feeder helpers) ----------------------------------------
def check_type(input: Any, input_name: str, expected_type: Any, op_name: str,
               extra_message: str = "") -> None:
    """TypeError naming the layer and argument when ``input`` is not ``expected_type``."""
    if not isinstance(input, expected_type):
        raise TypeError(f"The type of '{input_name}' in {op_name} must be "
                        f"{_type_names(expected_type)}, but received {type(input).__name__}. "
                        f"{extra_message}".rstrip())


def check_dtype(input_dtype: Any, input_name: str, expected_dtype: Sequence[str], op_name: str,
                extra_message: str = "") -> None:
    """TypeError naming the layer and argument when the data type is not one of
    ``expected_dtype`` (strings such as ``'float32'``)."""
    got = convert_dtype(input_dtype) if input_dtype is not None else "unknown"
    if got not in expected_dtype:
        raise TypeError(f"The data type of '{input_name}' in {op_name} must be "
                        f"{list(expected_dtype)}, but received {got}. {extra_message}".rstrip())


def check_variable_and_dtype(input: Any, input_name: str, expected_dtype: Sequence[str],
                             op_name: str, extra_message: str = "") -> None:
    """``check_type(input, ..., Variable)`` then ``check_dtype(input.dtype, ...)``, with the
    passing case inline (dygraph layers run it on every call)."""
    if not isinstance(input, Variable):
        check_type(input, input_name, Variable, op_name, extra_message)
    dt = input.dtype
    if dt is None or convert_dtype(dt) not in expected_dtype:
        check_dtype(dt, input_name, expected_dtype, op_name, extra_message)


def check_type_and_dtype(input: Any, input_name: str, expected_type: Any,
                         expected_dtype: Sequence[str], op_name: str,
                         extra_message: str = "") -> None:
    check_type(input, input_name, expected_type, op_name, extra_message)
    check_dtype(input.dtype, input_name, expected_dtype, op_name, extra_message)


def _type_names(t: Any) -> str:
    if isinstance(t, tuple):
        return " or ".join(x.__name__ for x in t)
    return t.__name__


# -- DataFeeder ---------------------------------------------------------------------------------
class DataToLoDTensorConverter:
    """Collects one variable's fields over a minibatch, then builds its LoDTensor."""

    def __init__(self, place: Any, lod_level: int, shape: Sequence[int], dtype: Any,
                 name: str = "") -> None:
        self.place = place
        self.lod_level = lod_level
        self.name = name
        # fluid: with more than one unknown dim the shape cannot guide a reshape
        self.shape: Optional[List[int]] = list(shape) if sum(d < 0 for d in shape) <= 1 \
            else None
        self.dtype = convert_dtype(dtype)
        self._reset()

    def _reset(self) -> None:
        self.data: List[Any] = []
        self.lod: List[List[int]] = [[] for _ in range(self.lod_level)]

    def feed(self, data: Any) -> None:
        self._feed_impl(data, self.lod, self.lod_level)

    def _feed_impl(self, data: Any, lod: List[List[int]], lod_level: int) -> None:
        if lod_level == 0:
            self.data.append(data)
        else:
            lod[0].append(len(data))
            for each in data:
                self._feed_impl(each, lod[1:], lod_level - 1)

    def _check_shape(self, shape: Sequence[int]) -> None:
        for s1, s2 in zip(self.shape, shape):
            if s1 != s2 and s1 >= 0 and s2 >= 0:
                raise ValueError(f"Shape not match. What is defined in data layer is "
                                 f"{self.shape}, but receive {list(shape)}")

    def done(self) -> LoDTensor:
        try:
            arr = np.array(self.data, dtype=self.dtype)
        except (ValueError, TypeError) as e:
            raise ValueError(f"DataFeeder: cannot convert the fields of '{self.name}' to a "
                             f"{self.dtype} array ({e}); every sample must have the same "
                             f"shape") from None
        if self.shape:
            if arr.ndim != len(self.shape):
                try:
                    arr = arr.reshape(self.shape)
                except ValueError:
                    raise ValueError(f"Reshape error. What is defined in data layer is "
                                     f"{self.shape}, but receive {list(arr.shape)}") from None
            else:
                self._check_shape(arr.shape)
        t = LoDTensor()
        t.set(arr, self.place)
        if self.lod_level > 0:
            t.set_recursive_sequence_lengths(self.lod)
        self._reset()
        return t


class DataFeeder:
    """Convert minibatches (lists of samples) into ``{name: LoDTensor}`` feed dicts.

    ``feed_list`` holds the data Variables (or their names, looked up in ``program``'s global
    block, default the default main program).

    Args:
        feed_list (list of Variable | str): the data variables (or their names) each sample
            fills, in order.
        place (Place): accepted for fluid's signature.
        program (Program | None): where to look up names (default: the default main program).

    Returns:
        DataFeeder: the feeder; ``feed(minibatch)`` builds feed dicts.

    Raises:
        TypeError: ``feed_list`` is not a list/tuple, or an entry is neither a Variable nor a name.
        ValueError: a name is not a variable of ``program``'s global block.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     x = fluid.data("x", [-1, 2])
        ...     label = fluid.data("label", [-1, 1], "int64")
        >>> feeder = fluid.DataFeeder(feed_list=[x, label], place=fluid.CPUPlace())
        >>> feed = feeder.feed([([1.0, 2.0], [0]), ([3.0, 4.0], [1])])      # a batch of 2 samples
        >>> np.array(feed["x"]), np.array(feed["label"]).ravel()
        (array([[1., 2.],
               [3., 4.]], dtype=float32), array([0, 1]))
    """

    def __init__(self, feed_list: Sequence[Union[Variable, str]], place: Any,
                 program: Optional[Program] = None) -> None:
        if isinstance(feed_list, (Variable, str)) or not isinstance(feed_list, (list, tuple)):
            raise TypeError(f"DataFeeder: feed_list should be a list of Variables or names, but "
                            f"received {type(feed_list).__name__}")
        program = program if program is not None else default_main_program()
        self.feed_dtypes: List[Any] = []
        self.feed_names: List[str] = []
        self.feed_shapes: List[Tuple[int, ...]] = []
        self.feed_lod_level: List[int] = []
        for var in feed_list:
            if isinstance(var, str):
                var = program.global_block().var(var)
            if not isinstance(var, Variable):
                raise TypeError(f"Feed list should contain a list of variable, but received "
                                f"{type(var).__name__}")
            self.feed_dtypes.append(var.dtype)
            self.feed_names.append(var.name)
            self.feed_lod_level.append(var.lod_level)
            self.feed_shapes.append(tuple(var.shape))
        self.place = place

    def _converters(self) -> List[DataToLoDTensorConverter]:
        return [DataToLoDTensorConverter(self.place, lod, shape, dtype, name)
                for name, lod, shape, dtype in zip(self.feed_names, self.feed_lod_level,
                                                   self.feed_shapes, self.feed_dtypes)]

    def feed(self, iterable: Iterable[Sequence[Any]]) -> Dict[str, LoDTensor]:
        """One minibatch -> ``{name: LoDTensor}``.

        Args:
            iterable (iterable of sequences): the samples of a batch, each with one value per feed
                variable.
        Returns:
            dict: ``{name: LoDTensor}`` ready for ``exe.run(feed=...)``.

        Raises:
            ValueError: a sample is not a list/tuple with one field per feed variable, the fields of
                a variable do not form one array of its dtype (ragged samples), or the batch does
                not fit the variable's shape (reshape or dimension mismatch).
            TypeError: a field of a ``lod_level > 0`` variable is not a sequence.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     words = fluid.data("words", [-1, 1], "int64", lod_level=1)
            >>> feeder = fluid.DataFeeder(feed_list=[words], place=fluid.CPUPlace())
            >>> # two sequences -> a LoD tensor
            >>> t = feeder.feed([([1, 2, 3],), ([4, 5],)])["words"]
            >>> t.recursive_sequence_lengths(), np.array(t).ravel()
            ([[3, 2]], array([1, 2, 3, 4, 5]))
        """
        converters = self._converters()
        for i, sample in enumerate(iterable):
            if not isinstance(sample, (list, tuple)) or len(sample) != len(converters):
                n = len(sample) if isinstance(sample, (list, tuple)) else 1
                raise ValueError(f"The number of fields in data ({n}) does not match "
                                 f"len(feed_list) ({len(converters)}) (sample {i}); each sample "
                                 f"must be a tuple with one field per fed variable "
                                 f"{self.feed_names}")
            for conv, field in zip(converters, sample):
                conv.feed(field)
        return {name: conv.done() for name, conv in zip(self.feed_names, converters)}

    def feed_parallel(self, iterable: Iterable[Iterable[Sequence[Any]]],
                      num_places: Optional[int] = None) -> Iterator[Dict[str, LoDTensor]]:
        """One feed dict per device, from one minibatch per device (fluid's multi-device feed).

        The number of minibatches must equal the number of devices: ``num_places``, or, as in
        fluid, the ``CPU_NUM`` environment variable (default 1).

        Args:
            iterable (Iterable[Iterable[Sequence]]): one minibatch per device, each as ``feed``
                takes it.
            num_places (int | None): the device count. Default None: ``CPU_NUM`` (1 if unset).

        Returns:
            Iterator[dict]: one ``{name: LoDTensor}`` dict per minibatch, lazily.

        Raises:
            ValueError: (while iterating) the number of minibatches differs from the device
                count, or a minibatch is malformed (as ``feed``).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            >>> feeder = fluid.DataFeeder(feed_list=[x], place=fluid.CPUPlace())
            >>> feeds = list(feeder.feed_parallel([[([1.0, 2.0],)], [([3.0, 4.0],)]], num_places=2))
            >>> [np.array(f["x"]).tolist() for f in feeds]
            [[[1.0, 2.0]], [[3.0, 4.0]]]
        """
        batches = list(iterable)
        num = _num_places(num_places)
        if len(batches) != num:
            raise ValueError(f"feed_parallel takes multiple mini-batches. Each mini-batch will be "
                             f"feed on each device. The number of devices and number of "
                             f"mini-batches must be same (devices: {num}, mini-batches: "
                             f"{len(batches)}; pass num_places= or set CPU_NUM)")
        for batch in batches:
            yield self.feed(batch)

    def decorate_reader(self, reader: Any, multi_devices: bool, num_places: Optional[int] = None,
                        drop_last: bool = True) -> Any:
        """Wrap a batch reader so that it yields feed dicts: one per minibatch, or with
        ``multi_devices`` a list of one per device, from that many consecutive minibatches.

        Args:
            reader (callable): a batch reader: returns an iterable of minibatches (lists of
                samples).
            multi_devices (bool): group minibatches per device (``feed_parallel``).
            num_places (int | None): the device count for ``multi_devices``. Default None:
                ``CPU_NUM`` (1 if unset).
            drop_last (bool): with ``multi_devices``, drop the minibatches left over at the end
                that do not fill every device; False raises there, as fluid did. Default True.

        Returns:
            callable: a reader yielding ``{name: LoDTensor}`` dicts, or lists of them.

        Raises:
            ValueError: (while reading) a minibatch is malformed (as ``feed``), or
                ``drop_last`` is False and minibatches are left over.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            >>> feeder = fluid.DataFeeder(feed_list=[x], place=fluid.CPUPlace())
            >>> def batches():
            ...     yield [([1.0, 2.0],), ([3.0, 4.0],)]
            >>> [np.array(d["x"]).shape for d in feeder.decorate_reader(batches, multi_devices=False)()]
            [(2, 2)]
        """
        def decorated() -> Iterator[Any]:
            if not multi_devices:
                for batch in reader():
                    yield self.feed(batch)
                return
            num, group = _num_places(num_places), []
            for batch in reader():
                group.append(batch)
                if len(group) == num:
                    yield list(self.feed_parallel(group, num))
                    group = []
            if group and not drop_last:
                raise ValueError(f"decorate_reader: {len(group)} mini-batch(es) left over do "
                                 f"not fill the {num} devices; only dropping them "
                                 f"(drop_last=True) is implemented, as in fluid")
        return decorated


def _num_places(num_places: Optional[int]) -> int:
    """fluid's device count for multi-device feeding: ``num_places``, else ``CPU_NUM``."""
    if num_places is not None:
        return int(num_places)
    try:
        num = int(os.environ.get("CPU_NUM", "1"))
    except ValueError:
        raise ValueError(f"CPU_NUM must be an integer, got {os.environ['CPU_NUM']!r}") from None
    return max(num, 1)
