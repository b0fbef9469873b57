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

    Args:
        capacity (int): the number of batches buffered ahead (>= 1).
        shapes (list of list of int): the shape of each variable (None or -1 for a varying dim).
        dtypes (list of str | numpy dtype): the dtype of each variable.
        lod_levels (list of int | None, default None): the LoD level of each variable (default
            all 0).
        name (str | None, default None): the prefix of the variables' names
            (``<name>_out_<i>``).
        use_double_buffer (bool, default True): prefetch batches in a background thread.
    Returns:
        PyReader: a non-iterable reader; ``read_file(reader)`` gives its variables, and
        ``reader.decorate_*`` / ``start()`` / ``reset()`` drive it.
    Raises:
        ValueError: ``shapes`` and ``dtypes`` are not lists of one length, ``lod_levels`` has
            another length, or ``capacity`` is below 1 or not an integer.
        TypeError: a dtype is unknown.

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

    Args:
        capacity (int): the number of batches buffered ahead (>= 1).
        feed_list (list of Variable): the data variables the reader fills.
        name (str | None, default None): accepted for fluid's signature.
        use_double_buffer (bool, default True): prefetch batches in a background thread.
    Returns:
        PyReader: a non-iterable reader feeding ``feed_list``.
    Raises:
        TypeError: ``feed_list`` is not iterable or holds a non-Variable.
        ValueError: ``feed_list`` is empty, or ``capacity`` is below 1 or not an integer.

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

    Args:
        reader (PyReader): a reader made by ``py_reader`` or ``create_py_reader_by_data``.
    Returns:
        Variable | list of Variable: the reader's variables (one Variable when there is one).
    Raises:
        TypeError: ``reader`` has no ``feed_list`` (it is not such a reader).

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

    Args:
        reader (PyReader): the reader.
        place (Place | None, default None): accepted for fluid's signature.
        name (str | None, default None): accepted for fluid's signature.
    Returns:
        PyReader: ``reader`` itself.
    Raises:
        None: this function returns its argument and does not raise.

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
