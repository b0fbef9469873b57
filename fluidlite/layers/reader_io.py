"""``fluid.layers.py_reader``, ``create_py_reader_by_data``, ``read_file``, ``double_buffer``.

``py_reader`` declares the data variables the reader fills (one per shape) and returns a
non-iterable ``PyReader`` (``fluidlite/reader.py``); ``read_file(reader)`` returns those
variables. Feed it with ``decorate_paddle_reader`` / ``decorate_sample_list_generator`` (lists of
samples) or ``decorate_tensor_provider`` / ``decorate_batch_generator`` (batches of arrays), then
``start()``, run until ``fluid.core.EOFException``, ``reset()``.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Union

from ..core import names
from ..core.ir import Variable, default_main_program

__all__ = ["py_reader", "create_py_reader_by_data", "read_file", "double_buffer"]


def py_reader(capacity: int, shapes: Sequence[Sequence[int]], dtypes: Sequence[Any],
              lod_levels: Optional[Sequence[int]] = None, name: Optional[str] = None,
              use_double_buffer: bool = True) -> Any:
    """A non-iterable reader of ``len(shapes)`` variables (shape, dtype, lod level each).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     reader = fluid.layers.py_reader(capacity=4, shapes=[[-1, 2]], dtypes=["float32"])
        ...     x = fluid.layers.read_file(reader)
        ...     s = fluid.layers.reduce_sum(x)
        >>> reader.decorate_batch_generator(lambda: iter([[np.ones((1, 2), "float32")]] * 2))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> reader.start()
        >>> out = []
        >>> try:
        ...     while True:
        ...         out.append(exe.run(main, fetch_list=[s])[0].item())
        ... except fluid.core.EOFException:
        ...     reader.reset()
        >>> out
        [2.0, 2.0]
    """
    from ..pipeline.reader import PyReader
    if not isinstance(shapes, (list, tuple)) or not isinstance(dtypes, (list, tuple)) or \
            len(shapes) != len(dtypes):
        raise ValueError("py_reader: shapes and dtypes must be lists of the same length")
    lod_levels = list(lod_levels) if lod_levels is not None else [0] * len(shapes)
    if len(lod_levels) != len(shapes):
        raise ValueError("py_reader: lod_levels must have one entry per shape")
    prefix = name or names.generate("py_reader")
    block = default_main_program().global_block()
    feed_list = [block.create_var(name=f"{prefix}_out_{i}",
                                  shape=[-1 if d is None else int(d) for d in shape],
                                  dtype=dtype, lod_level=int(lod), stop_gradient=True,
                                  is_data=True, need_check_feed=False)
                 for i, (shape, dtype, lod) in enumerate(zip(shapes, dtypes, lod_levels))]
    return PyReader(feed_list, capacity, use_double_buffer, iterable=False)


def create_py_reader_by_data(capacity: int, feed_list: Sequence[Variable],
                             name: Optional[str] = None, use_double_buffer: bool = True) -> Any:
    """A non-iterable reader feeding existing data variables ``feed_list``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     image = fluid.data("image", [-1, 3])
        ...     reader = fluid.layers.create_py_reader_by_data(capacity=2, feed_list=[image])
        ...     x = fluid.layers.read_file(reader)
        ...     s = fluid.layers.reduce_sum(x)
        >>> reader.decorate_batch_generator(lambda: iter([[np.ones((2, 3), "float32")]]))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> reader.start()
        >>> exe.run(main, fetch_list=[s])[0]
        array([6.], dtype=float32)
        >>> reader.reset()
    """
    from ..pipeline.reader import PyReader
    return PyReader(list(feed_list), capacity, use_double_buffer, iterable=False)


def read_file(reader: Any) -> Union[Variable, List[Variable]]:
    """The variables ``reader`` fills (one Variable when there is one).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     reader = fluid.layers.py_reader(capacity=2, shapes=[[-1, 1], [-1, 1]],
        ...                                     dtypes=["float32", "int64"])
        ...     x, label = fluid.layers.read_file(reader)       # one Variable per slot
        >>> x.shape, label.shape
        ((-1, 1), (-1, 1))
    """
    feed_list = getattr(reader, "feed_list", None)
    if feed_list is None:
        raise TypeError(f"read_file: expected a reader made by fluid.layers.py_reader, got "
                        f"{type(reader).__name__}")
    return feed_list[0] if len(feed_list) == 1 else list(feed_list)


def double_buffer(reader: Any, place: Any = None, name: Optional[str] = None) -> Any:
    """The reader itself: fluidlite's readers already prefetch in a background thread.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     reader = fluid.layers.py_reader(capacity=2, shapes=[[-1, 1]], dtypes=["float32"],
        ...                                     use_double_buffer=False)
        ...     reader = fluid.layers.double_buffer(reader)   # prefetch the next batch
        ...     x = fluid.layers.read_file(reader)
        >>> x.shape
        (-1, 1)
    """
    return reader
