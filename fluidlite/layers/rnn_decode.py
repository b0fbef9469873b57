"""fluid 1.8's decoding API: ``Decoder``, ``BasicDecoder``, ``BeamSearchDecoder``,
``dynamic_decode`` and the helpers ``DecodeHelper``, ``TrainingHelper``,
``GreedyEmbeddingHelper``, ``SampleEmbeddingHelper``.

Decoders are written with ordinary layers, so the same objects build static programs and run
eagerly in dygraph mode. ``dynamic_decode`` is where the modes differ, as in fluid 1.8: a
static program loops with ``While`` (inputs, states and finished flags are loop-carried
variables, every step's outputs go to tensor arrays stacked after the loop); dygraph runs a
Python loop.
"""
from __future__ import annotations

import collections
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

from ..core.atomic import atomic_layer as _atomic_layer
from ..core.dtypes import convert_dtype
from ..core.ir import Variable
from ..layer_helper import check_int
from .rnn_cells import (RNNCell, _L, _dygraph, _flatten, _map, _pack,
                        _transpose_batch_time)

__all__ = ["Decoder", "BasicDecoder", "BeamSearchDecoder", "dynamic_decode", "DecodeHelper",
           "TrainingHelper", "GreedyEmbeddingHelper", "SampleEmbeddingHelper"]


class Decoder:
    """Base class of decoders for ``dynamic_decode``: ``initialize(inits) -> (inputs, states,
    finished)``, ``step(time, inputs, states, **kwargs) -> (outputs, next_states, next_inputs,
    finished)`` and optionally ``finalize(outputs, final_states, sequence_lengths)``.

    Args:
        None: the base constructor takes no arguments (subclasses define their own).
    Returns:
        Decoder: the decoder object that ``dynamic_decode`` drives.
    Raises:
        NotImplementedError: (when decoding) a subclass does not implement ``initialize`` or
            ``step``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     trg = fluid.data("trg", [-1, 5, 8])                  # embedded target words
        ...     length = fluid.data("length", [-1], "int64")
        ...     helper = fluid.layers.TrainingHelper(trg, length)     # feeds the true previous word
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"enc": np.ones((2, 8), "float32"), "trg": np.ones((2, 5, 8), "float32"),
        ...         "length": np.array([5, 3], "int64")}
        >>> # logits per step
        >>> exe.run(main, feed=feed, fetch_list=[outputs.cell_outputs])[0].shape
        (2, 5, 10)
    """

    # constructing a decoder builds nothing; dynamic_decode (a layer) is the transaction
    __fluidlite_atomic__ = True

    def initialize(self, inits: Any) -> Tuple[Any, Any, Any]:
        """``(initial inputs, initial states, finished)`` from ``inits``; subclasses implement
        it, ``dynamic_decode`` calls it once.

        Args:
            inits (Any): what the decoder needs to start, e.g. the initial cell states.
        Returns:
            tuple: ``(initial_inputs, initial_states, finished)``; ``finished`` is a bool Variable
            [batch] (or [batch, beam]).
        Raises:
            NotImplementedError: always, in the base class (subclasses override it).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])
            ...     trg = fluid.data("trg", [-1, 5, 8])                  # embedded target words
            ...     length = fluid.data("length", [-1], "int64")
            ...     # feeds the true previous word
            ...     helper = fluid.layers.TrainingHelper(trg, length)
            ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
            ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> feed = {"enc": np.ones((2, 8), "float32"), "trg": np.ones((2, 5, 8), "float32"),
            ...         "length": np.array([5, 3], "int64")}
            >>> # logits per step
            >>> exe.run(main, feed=feed, fetch_list=[outputs.cell_outputs])[0].shape
            (2, 5, 10)
        """
        raise NotImplementedError

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> Tuple[Any, Any, Any, Any]:
        """One decoding step ``(outputs, next_states, next_inputs, finished)`` from ``time``,
        ``inputs`` and ``states``; subclasses implement it, ``dynamic_decode`` calls it.

        Args:
            time (Variable): int64 [1], the step index (from 0).
            inputs (Variable | nested structure of Variable): this step's inputs.
            states (Variable | nested structure of Variable): the states after the previous step.
            **kwargs: passed through from ``dynamic_decode``.
        Returns:
            tuple: ``(outputs, next_states, next_inputs, finished)``.
        Raises:
            NotImplementedError: always, in the base class (subclasses override it).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])
            ...     trg = fluid.data("trg", [-1, 5, 8])                  # embedded target words
            ...     length = fluid.data("length", [-1], "int64")
            ...     # feeds the true previous word
            ...     helper = fluid.layers.TrainingHelper(trg, length)
            ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
            ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> feed = {"enc": np.ones((2, 8), "float32"), "trg": np.ones((2, 5, 8), "float32"),
            ...         "length": np.array([5, 3], "int64")}
            >>> # logits per step
            >>> exe.run(main, feed=feed, fetch_list=[outputs.cell_outputs])[0].shape
            (2, 5, 10)
        """
        raise NotImplementedError

    def finalize(self, outputs: Any, final_states: Any, sequence_lengths: Any
                 ) -> Tuple[Any, Any]:
        raise NotImplementedError


class DecodeHelper:
    """Sampling strategy of a ``BasicDecoder``: ``initialize() -> (inputs, finished)``,
    ``sample(time, outputs, states) -> ids``, ``next_inputs(time, outputs, states, ids) ->
    (finished, next_inputs, next_states)``.

    Args:
        None: the base constructor takes no arguments (subclasses define their own).
    Returns:
        DecodeHelper: the helper object a ``BasicDecoder`` calls.
    Raises:
        NotImplementedError: (when decoding) a subclass does not implement ``initialize``,
            ``sample`` or ``next_inputs``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     trg = fluid.data("trg", [-1, 5, 8])                  # embedded target words
        ...     length = fluid.data("length", [-1], "int64")
        ...     helper = fluid.layers.TrainingHelper(trg, length)     # feeds the true previous word
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"enc": np.ones((2, 8), "float32"), "trg": np.ones((2, 5, 8), "float32"),
        ...         "length": np.array([5, 3], "int64")}
        >>> # logits per step
        >>> exe.run(main, feed=feed, fetch_list=[outputs.cell_outputs])[0].shape
        (2, 5, 10)
    """

    # helpers whose constructor builds ops wrap it in a transaction (below)
    __fluidlite_atomic__ = True

    def initialize(self) -> Tuple[Any, Any]:
        raise NotImplementedError

    def sample(self, time: Variable, outputs: Any, states: Any) -> Any:
        raise NotImplementedError

    def next_inputs(self, time: Variable, outputs: Any, states: Any, sample_ids: Any
                    ) -> Tuple[Any, Any, Any]:
        raise NotImplementedError


class TrainingHelper(DecodeHelper):
    """Teacher forcing: step t's input is ``inputs[:, t]`` (``inputs[t]`` when time major);
    a sequence is finished once ``t + 1 >= sequence_length``; ``sample`` is the argmax.

    Args:
        inputs (Variable): the (embedded) target inputs ``[N, T, ...]`` (``[T, N, ...]`` with
            ``time_major``).
        sequence_length (Variable): int ``[N]`` lengths.
        time_major (bool, default False): the layout of ``inputs``.
    Returns:
        TrainingHelper: the helper for a ``BasicDecoder``.
    Raises:
        AttributeError: an entry of ``inputs`` is not a Variable (it has no ``shape``).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     trg = fluid.data("trg", [-1, 5, 8])                  # embedded target words
        ...     length = fluid.data("length", [-1], "int64")
        ...     helper = fluid.layers.TrainingHelper(trg, length)     # feeds the true previous word
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> feed = {"enc": np.ones((2, 8), "float32"), "trg": np.ones((2, 5, 8), "float32"),
        ...         "length": np.array([5, 3], "int64")}
        >>> # logits per step
        >>> exe.run(main, feed=feed, fetch_list=[outputs.cell_outputs])[0].shape
        (2, 5, 10)
    """

    def __init__(self, inputs: Any, sequence_length: Variable, time_major: bool = False) -> None:
        L = _L()
        self.inputs, self.sequence_length, self.time_major = inputs, sequence_length, time_major
        # one padding step so that slicing step t + 1 never runs out of range
        self.inputs_ = _map(lambda x: L.pad(x, paddings=([0, 1] + [0, 0] * (len(x.shape) - 1))
                                            if time_major else
                                            ([0, 0, 0, 1] + [0, 0] * (len(x.shape) - 2))),
                            inputs)

    def initialize(self) -> Tuple[Any, Any]:
        L = _L()
        finished = L.equal(self.sequence_length,
                           L.fill_constant([1], self.sequence_length.dtype, 0))
        first = _map(lambda x: self._slice(x, 0), self.inputs)
        return first, finished

    def _slice(self, x: Variable, t: Any) -> Variable:
        L = _L()
        axis = 0 if self.time_major else 1
        end = t + 1
        return L.squeeze(L.slice(x, axes=[axis], starts=[t], ends=[end]), axes=[axis])

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        return _L().argmax(outputs, axis=-1)

    def next_inputs(self, time: Variable, outputs: Any, states: Any, sample_ids: Any
                    ) -> Tuple[Any, Any, Any]:
        L = _L()
        time = L.cast(time, "int32") if convert_dtype(time.dtype) != "int32" else time
        length = self.sequence_length
        if length.dtype != time.dtype:
            length = L.cast(length, time.dtype)
        next_time = time + 1
        finished = L.less_equal(length, next_time)
        next_inputs = _map(lambda x: self._slice(x, next_time), self.inputs_)
        return finished, next_inputs, states


class GreedyEmbeddingHelper(DecodeHelper):
    """Greedy decoding: the argmax id of each step, embedded by ``embedding_fn``, is the next
    input; a sequence finishes when it emits ``end_token``.

    Args:
        embedding_fn (callable): maps ids to the cell's inputs.
        start_tokens (Variable): int64 ``[N]`` first ids.
        end_token (int): the id that finishes a sequence.
    Returns:
        GreedyEmbeddingHelper: the helper for a ``BasicDecoder``.
    Raises:
        TypeError: ``end_token`` is not an int.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     start = fluid.layers.fill_constant_batch_size_like(enc, [-1], "int64", 0)
        ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
        ...     helper = fluid.layers.GreedyEmbeddingHelper(emb, start, end_token=1)
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=4)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs.sample_ids])
        >>> ids.shape[0], ids.dtype                            # [batch, steps] word ids
        (2, dtype('int64'))
    """

    def __init__(self, embedding_fn: Callable, start_tokens: Variable, end_token: int) -> None:
        self.embedding_fn = embedding_fn
        self.start_tokens = start_tokens
        self.end_token = _L().fill_constant([1], "int64", check_int(
            end_token, "end_token", type(self).__name__))

    def initialize(self) -> Tuple[Any, Any]:
        L = _L()
        finished = L.fill_constant_batch_size_like(input=self.start_tokens, shape=[-1],
                                                   dtype="bool", value=0)
        return self.embedding_fn(self.start_tokens), finished

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        return _L().argmax(outputs, axis=-1)

    def next_inputs(self, time: Variable, outputs: Any, states: Any, sample_ids: Variable
                    ) -> Tuple[Any, Any, Any]:
        finished = _L().equal(sample_ids, self.end_token)
        return finished, self.embedding_fn(sample_ids), states


class SampleEmbeddingHelper(GreedyEmbeddingHelper):
    """Like ``GreedyEmbeddingHelper`` but samples ids from ``softmax(outputs /
    softmax_temperature)`` (op ``sampling_id``, ``seed`` as fluid).

    Args:
        embedding_fn (callable): maps ids to the cell's inputs.
        start_tokens (Variable): int64 ``[N]`` first ids.
        end_token (int): the id that finishes a sequence.
        softmax_temperature (float | None): divides the logits before sampling.
        seed (int | None): the sampling seed.
    Returns:
        SampleEmbeddingHelper: the helper for a ``BasicDecoder``.
    Raises:
        TypeError: ``end_token`` is not an int, or ``softmax_temperature`` is not a number.
        ValueError: ``softmax_temperature`` is not positive.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     start = fluid.layers.fill_constant_batch_size_like(enc, [-1], "int64", 0)
        ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
        ...     helper = fluid.layers.SampleEmbeddingHelper(emb, start, end_token=1, seed=1)
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=4)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs.sample_ids])
        >>> ids.shape[0], ids.dtype                            # [batch, steps] word ids
        (2, dtype('int64'))
    """

    def __init__(self, embedding_fn: Callable, start_tokens: Variable, end_token: int,
                 softmax_temperature: Optional[float] = None, seed: Optional[int] = None
                 ) -> None:
        super().__init__(embedding_fn, start_tokens, end_token)
        if softmax_temperature is not None and not softmax_temperature > 0:
            raise ValueError(f"SampleEmbeddingHelper: softmax_temperature must be > 0, but "
                             f"received {softmax_temperature}")
        self.softmax_temperature = softmax_temperature
        self.seed = seed

    def sample(self, time: Variable, outputs: Variable, states: Any) -> Variable:
        L = _L()
        logits = outputs if self.softmax_temperature is None else \
            L.scale(outputs, scale=1.0 / self.softmax_temperature)
        probs = L.softmax(logits)
        probs.stop_gradient = True
        return L.sampling_id(probs, seed=self.seed or 0, dtype=self.start_tokens.dtype)


class BasicDecoder(Decoder):
    """``cell`` + ``helper``: a step runs the cell (then ``output_fn``), samples ids with the
    helper and lets it produce the next inputs and the finished flags. Outputs are
    ``OutputWrapper(cell_outputs, sample_ids)``.

    Args:
        cell (RNNCell): the step function.
        helper (DecodeHelper): how inputs are chosen (``TrainingHelper``,
            ``GreedyEmbeddingHelper``, ``SampleEmbeddingHelper``).
        output_fn (callable | None): maps the cell output to logits.
    Returns:
        BasicDecoder: the decoder for ``dynamic_decode``.
    Raises:
        None: the constructor only stores its arguments; errors of ``cell`` or ``helper`` surface
            when ``dynamic_decode`` runs them.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])
        ...     start = fluid.layers.fill_constant_batch_size_like(enc, [-1], "int64", 0)
        ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
        ...     helper = fluid.layers.GreedyEmbeddingHelper(emb, start, end_token=1)
        ...     decoder = fluid.layers.BasicDecoder(fluid.layers.GRUCell(hidden_size=8), helper,
        ...                                         output_fn=lambda h: fluid.layers.fc(h, size=10))
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=4)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs.sample_ids])
        >>> ids.shape[0], ids.dtype                            # [batch, steps] word ids
        (2, dtype('int64'))
    """

    OutputWrapper = collections.namedtuple("OutputWrapper", ("cell_outputs", "sample_ids"))

    def __init__(self, cell: RNNCell, helper: DecodeHelper,
                 output_fn: Optional[Callable] = None) -> None:
        self.cell, self.helper, self.output_fn = cell, helper, output_fn

    def initialize(self, initial_cell_states: Any) -> Tuple[Any, Any, Any]:
        inputs, finished = self.helper.initialize()
        return inputs, initial_cell_states, finished

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> Tuple[Any, Any, Any, Any]:
        cell_outputs, cell_states = self.cell(inputs, states, **kwargs)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        sample_ids = self.helper.sample(time=time, outputs=cell_outputs, states=cell_states)
        sample_ids.stop_gradient = True
        finished, next_inputs, next_states = self.helper.next_inputs(
            time=time, outputs=cell_outputs, states=cell_states, sample_ids=sample_ids)
        return self.OutputWrapper(cell_outputs, sample_ids), next_states, next_inputs, finished


class BeamSearchDecoder(Decoder):
    """Beam search over ``cell``: inputs and states are tiled to ``[batch * beam_size, ...]``;
    each step adds the log-softmax of the (``output_fn``) logits to the beams' scores (a
    finished beam can only extend with ``end_token``, at no cost), keeps the ``beam_size``
    best (beam, token) pairs per batch entry and reorders the states by their beams.
    ``finalize`` backtraces the parent pointers with ``gather_tree``: outputs are
    ``[time, batch, beam]`` (before ``dynamic_decode``'s transpose) ids, best beam first.

    Args:
        cell (RNNCell): the step function.
        start_token (int): the first input id.
        end_token (int): the id that finishes a beam.
        beam_size (int): beams kept per batch entry.
        embedding_fn (callable | None): maps ids to the cell's inputs.
        output_fn (callable | None): maps the cell output to logits.
    Returns:
        BeamSearchDecoder: the decoder for ``dynamic_decode``.
    Raises:
        TypeError: ``start_token``, ``end_token`` or ``beam_size`` is not an int.
        ValueError: ``beam_size`` is below 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
        ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
        ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
        ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
        ...                                              end_token=1, beam_size=3, embedding_fn=emb,
        ...                                              output_fn=out_fn)
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs])
        >>> ids.shape[0], ids.shape[2]                         # [batch, steps, beam]
        (2, 3)
    """

    OutputWrapper = collections.namedtuple("OutputWrapper",
                                           ("scores", "predicted_ids", "parent_ids"))
    StateWrapper = collections.namedtuple("StateWrapper",
                                          ("cell_states", "log_probs", "finished", "lengths"))

    def __init__(self, cell: RNNCell, start_token: int, end_token: int, beam_size: int,
                 embedding_fn: Optional[Callable] = None,
                 output_fn: Optional[Callable] = None) -> None:
        self.cell = cell
        self.embedding_fn, self.output_fn = embedding_fn, output_fn
        self.start_token = check_int(start_token, "start_token", "BeamSearchDecoder")
        self.end_token = check_int(end_token, "end_token", "BeamSearchDecoder")
        self.beam_size = check_int(beam_size, "beam_size", "BeamSearchDecoder", minimum=1)

    @staticmethod
    def tile_beam_merge_with_batch(x: Variable, beam_size: int) -> Variable:
        """``[batch, ...]`` -> ``[batch * beam_size, ...]``, each entry repeated beam_size
        times in a row (for tensors the cell reads besides its inputs/states, e.g. the encoder
        output of an attention).

        Args:
            x (Variable): a tensor [batch, ...].
            beam_size (int): the number of copies of each entry.
        Returns:
            Variable: [batch * beam_size, ...], dtype of ``x``.
        Raises:
            TypeError: ``x`` is not a Variable, or ``beam_size`` is not an int.
            ValueError: ``beam_size`` is below 1 (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     x = fluid.data("x", [-1, 2])
            ...     tiled = fluid.layers.BeamSearchDecoder.tile_beam_merge_with_batch(x, beam_size=3)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, feed={"x": np.array([[1, 2], [3, 4]], "float32")}, fetch_list=[tiled])[0]
            array([[1., 2.],
                   [1., 2.],
                   [1., 2.],
                   [3., 4.],
                   [3., 4.],
                   [3., 4.]], dtype=float32)
        """
        L = _L()
        x = L.unsqueeze(x, [1])
        times = [1] * len(x.shape)
        times[1] = beam_size
        x = L.expand(x, times)                                       # [batch, beam, ...]
        # as fluid 1.8: batch and beam moved last and merged with a copy-dims (0) reshape, so
        # that other unknown dims (an encoder output's time) need no compile-time value
        rank = len(x.shape)
        x = L.transpose(x, list(range(2, rank)) + [0, 1])            # [..., batch, beam]
        x = L.reshape(x, [0] * (rank - 2) + [-1])                    # [..., batch * beam]
        return L.transpose(x, [rank - 2] + list(range(rank - 2)))    # [batch * beam, ...]

    def _split_batch_beams(self, x: Variable) -> Variable:
        return _L().reshape(x, [-1, self.beam_size] + [int(d) for d in x.shape[1:]])

    def _merge_batch_beams(self, x: Variable) -> Variable:
        return _L().reshape(x, [-1] + [int(d) for d in x.shape[2:]])

    def _expand_to_beam_size(self, x: Variable) -> Variable:
        L = _L()
        x = L.unsqueeze(x, [1])
        times = [1] * len(x.shape)
        times[1] = self.beam_size
        return L.expand(x, times)

    def _mask_probs(self, probs: Variable, finished: Variable) -> Variable:
        """Finished beams put all their mass on ``end_token`` (log-prob 0, others -inf)."""
        L = _L()
        fin = L.cast(finished, probs.dtype)
        return L.elementwise_mul(L.expand(L.unsqueeze(fin, [2]), [1, 1, self.vocab_size]),
                                 self.noend_mask_tensor, axis=-1) - \
            L.elementwise_mul(probs, fin - 1, axis=0)

    def _gather(self, x: Variable, indices: Variable, batch_size: Variable) -> Variable:
        """``x[b, indices[b, k]]`` for ``x`` [batch, beam, ...]."""
        L = _L()
        bs = L.cast(batch_size, indices.dtype) if batch_size.dtype != indices.dtype \
            else batch_size
        batch_pos = L.expand(L.unsqueeze(L.range(0, bs, 1, dtype=indices.dtype), [1]),
                             [1, self.beam_size])
        return L.gather_nd(x, L.stack([batch_pos, indices], axis=2))

    def initialize(self, initial_cell_states: Any) -> Tuple[Any, Any, Any]:
        """Tile the initial cell states ``beam_size`` times and start every beam from
        ``start_token`` (only the first beam live); ``dynamic_decode`` calls it.

        Args:
            initial_cell_states (Variable | nested structure of Variable): the cell's initial
                states, each [batch, ...].
        Returns:
            tuple: ``(initial_inputs, StateWrapper(cell_states, log_probs, finished, lengths),
            finished)``; the inputs are start-token ids [batch, beam_size] (embedded by
            ``embedding_fn`` when given), ``finished`` bool [batch, beam_size].
        Raises:
            IndexError: ``initial_cell_states`` holds no tensor.
            TypeError: a state is not a Variable.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
            ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
            ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
            ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
            ...                                              end_token=1, beam_size=3, embedding_fn=emb,
            ...                                              output_fn=out_fn)
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs])
            >>> ids.shape[0], ids.shape[2]                         # [batch, steps, beam]
            (2, 3)
        """
        L = _L()
        self.kinf = 1e9
        state = _flatten(initial_cell_states)[0]
        self.batch_size = L.slice(L.shape(state), axes=[0], starts=[0], ends=[1])
        self.start_token_tensor = L.fill_constant([1], "int64", self.start_token)
        self.end_token_tensor = L.fill_constant([1], "int64", self.end_token)
        init_cell_states = _map(self._expand_to_beam_size, initial_cell_states)
        init_inputs = L.fill_constant_batch_size_like(
            input=state, shape=[-1, self.beam_size], dtype="int64", value=self.start_token)
        # only beam 0 is alive at the start: the others score -inf until the first top-k
        first = L.assign(np.array([0.] + [-self.kinf] * (self.beam_size - 1), "float32"))
        log_probs = L.elementwise_add(
            L.fill_constant_batch_size_like(input=state, shape=[-1, self.beam_size],
                                            dtype="float32", value=0.0), first, axis=-1)
        finished = L.fill_constant_batch_size_like(input=state, shape=[-1, self.beam_size],
                                                   dtype="bool", value=0)
        lengths = L.fill_constant_batch_size_like(input=state, shape=[-1, self.beam_size],
                                                  dtype="int64", value=0)
        if self.embedding_fn is not None:
            init_inputs = self.embedding_fn(init_inputs)
        return init_inputs, self.StateWrapper(init_cell_states, log_probs, finished,
                                              lengths), finished

    def _beam_search_step(self, time: Variable, logits: Variable, next_cell_states: Any,
                          beam_state: Any) -> Tuple[Any, Any]:
        L = _L()
        self.vocab_size = int(logits.shape[-1])
        self.vocab_size_tensor = L.fill_constant([1], "int64", self.vocab_size)
        noend = np.full([self.vocab_size], -self.kinf, "float32")
        noend[self.end_token] = 0
        self.noend_mask_tensor = L.assign(noend)
        step_log_probs = L.log(L.softmax(logits))
        step_log_probs = self._mask_probs(step_log_probs, beam_state.finished)
        log_probs = L.elementwise_add(step_log_probs, beam_state.log_probs, axis=0)
        scores = L.reshape(log_probs, [-1, self.beam_size * self.vocab_size])
        topk_scores, topk_indices = L.topk(scores, k=self.beam_size)
        beam_indices = L.elementwise_floordiv(topk_indices, self.vocab_size_tensor)
        token_indices = L.elementwise_mod(topk_indices, self.vocab_size_tensor)
        # gathering ``scores`` at the top-k indices gives the top-k scores themselves
        next_log_probs = topk_scores
        next_cell_states = _map(lambda x: self._gather(x, beam_indices, self.batch_size),
                                next_cell_states)
        next_finished = self._gather(beam_state.finished, beam_indices, self.batch_size)
        next_lengths = self._gather(beam_state.lengths, beam_indices, self.batch_size)
        next_lengths = next_lengths + L.cast(L.logical_not(next_finished),
                                             beam_state.lengths.dtype)
        next_finished = L.logical_or(next_finished,
                                     L.equal(token_indices, self.end_token_tensor))
        return (self.OutputWrapper(topk_scores, token_indices, beam_indices),
                self.StateWrapper(next_cell_states, next_log_probs, next_finished,
                                  next_lengths))

    def step(self, time: Variable, inputs: Any, states: Any, **kwargs: Any
             ) -> Tuple[Any, Any, Any, Any]:
        """One beam-search step: run the cell on the beams' inputs, add the log-softmax of the
        logits to the beam scores, keep the ``beam_size`` best extensions; ``dynamic_decode`` calls
        it.

        Args:
            time (Variable): int64 [1], the step index.
            inputs (Variable | nested structure of Variable): the inputs [batch, beam_size, ...].
            states (StateWrapper): the beam state returned by the previous step (or ``initialize``).
            **kwargs: passed to the cell.
        Returns:
            tuple: ``(OutputWrapper(scores, predicted_ids, parent_ids), StateWrapper,
            next_inputs, finished)``, each tensor [batch, beam_size, ...].
        Raises:
            ValueError: the cell or ``output_fn`` returns tensors whose shapes do not fit the beams
                (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
            ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
            ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
            ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
            ...                                              end_token=1, beam_size=3, embedding_fn=emb,
            ...                                              output_fn=out_fn)
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs])
            >>> ids.shape[0], ids.shape[2]                         # [batch, steps, beam]
            (2, 3)
        """
        inputs = _map(self._merge_batch_beams, inputs)
        cell_states = _map(self._merge_batch_beams, states.cell_states)
        cell_outputs, next_cell_states = self.cell(inputs, cell_states, **kwargs)
        cell_outputs = _map(self._split_batch_beams, cell_outputs)
        next_cell_states = _map(self._split_batch_beams, next_cell_states)
        if self.output_fn is not None:
            cell_outputs = self.output_fn(cell_outputs)
        out, state = self._beam_search_step(time, cell_outputs, next_cell_states, states)
        ids = out.predicted_ids
        next_inputs = self.embedding_fn(ids) if self.embedding_fn is not None else ids
        return out, state, next_inputs, state.finished

    def finalize(self, outputs: Any, final_states: Any, sequence_lengths: Any
                 ) -> Tuple[Any, Any]:
        """Backtrace the beams (``gather_tree`` over the parent ids): the predicted ids of each
        beam, best first; ``dynamic_decode`` calls it after the last step.

        Args:
            outputs (OutputWrapper): the stacked step outputs, [time, batch, beam_size] each.
            final_states (StateWrapper): the states after the last step.
            sequence_lengths (Variable): the decoded lengths (unused by the backtrace).
        Returns:
            tuple: ``(predicted_ids, final_states)``: int64 [time, batch, beam_size] ids after the
            backtrace, and ``final_states`` unchanged.
        Raises:
            None: the inputs come from ``dynamic_decode``; this method adds no checks.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
            ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
            ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
            ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
            ...                                              end_token=1, beam_size=3, embedding_fn=emb,
            ...                                              output_fn=out_fn)
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs])
            >>> ids.shape[0], ids.shape[2]                         # [batch, steps, beam]
            (2, 3)
        """
        return _L().gather_tree(outputs.predicted_ids, outputs.parent_ids), final_states

    @property
    def output_dtype(self) -> Any:
        """The dtypes of a step's outputs: ``OutputWrapper(scores='float32',
        predicted_ids='int64', parent_ids='int64')``.

        Args:
            None: a read-only property.
        Returns:
            OutputWrapper: ``(scores='float32', predicted_ids='int64', parent_ids='int64')``.
        Raises:
            None: this property does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
            ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
            ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
            ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
            ...                                              end_token=1, beam_size=3, embedding_fn=emb,
            ...                                              output_fn=out_fn)
            ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> decoder.output_dtype
            OutputWrapper(scores='float32', predicted_ids='int64', parent_ids='int64')
        """
        return self.OutputWrapper(scores="float32", predicted_ids="int64", parent_ids="int64")


def dynamic_decode(decoder: Decoder, inits: Any = None, max_step_num: Optional[int] = None,
                   output_time_major: bool = False, impute_finished: bool = False,
                   is_test: bool = False, return_length: bool = False, **kwargs: Any
                   ) -> Tuple[Any, ...]:
    """Run ``decoder.step`` until every entry is finished (or ``max_step_num`` steps have
    run after the first, as fluid counts): ``initialize(inits)`` once, then steps, then
    ``finalize`` if the decoder has one. Returns ``(final_outputs, final_states)``, and
    ``sequence_lengths`` as a third item with ``return_length=True`` (fluid 1.8.0's contract;
    the zoo's seq2seq unpacks two). Outputs are batch major unless ``output_time_major``.
    Static programs loop with ``While`` (outputs collected in tensor arrays); dygraph runs a
    Python loop.

    Args:
        decoder (Decoder): the decoder to run (``BasicDecoder``, ``BeamSearchDecoder`` or a
            subclass of ``Decoder``).
        inits (Any, default None): passed to ``decoder.initialize``.
        max_step_num (int | None, default None): stop after this many steps beyond the first;
            None: until every entry is finished.
        output_time_major (bool, default False): return outputs [time, batch, ...] instead of
            [batch, time, ...].
        impute_finished (bool, default False): keep the states of finished entries unchanged.
        is_test (bool, default False): passed to the ``While`` loop (static mode).
        return_length (bool, default False): also return the lengths of the decoded
            sequences.
        **kwargs: passed to every ``decoder.step``.
    Returns:
        tuple: ``(final_outputs, final_states)``, or ``(final_outputs, final_states,
        sequence_lengths)`` with ``return_length``; ``sequence_lengths`` is int64 in the shape
        of ``finished``.
    Raises:
        TypeError: ``decoder`` is not a Decoder (nor has a ``step``), or ``max_step_num`` is not
            an int.
        ValueError: ``max_step_num`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     enc = fluid.data("enc", [-1, 8])                     # the encoder's final state
        ...     emb = lambda ids: fluid.embedding(ids, size=[10, 8], param_attr="emb_w")
        ...     out_fn = lambda h: fluid.layers.fc(h, size=10, num_flatten_dims=len(h.shape) - 1)
        ...     decoder = fluid.layers.BeamSearchDecoder(fluid.layers.GRUCell(hidden_size=8), start_token=0,
        ...                                              end_token=1, beam_size=3, embedding_fn=emb,
        ...                                              output_fn=out_fn)
        ...     outputs, final = fluid.layers.dynamic_decode(decoder, inits=enc, max_step_num=5)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> ids, = exe.run(main, feed={"enc": np.ones((2, 8), "float32")}, fetch_list=[outputs])
        >>> ids.shape[0], ids.shape[2]                         # [batch, steps, beam]
        (2, 3)
    """
    if not isinstance(decoder, Decoder) and not callable(getattr(decoder, "step", None)):
        raise TypeError(f"dynamic_decode: decoder must be a Decoder, but received "
                        f"{type(decoder).__name__}")
    if max_step_num is not None:
        max_step_num = check_int(max_step_num, "max_step_num", "dynamic_decode", minimum=0)
    if _dygraph():
        outputs, states, lengths = _decode_dygraph(decoder, inits, max_step_num,
                                                   impute_finished, **kwargs)
    else:
        outputs, states, lengths = _decode_static(decoder, inits, max_step_num,
                                                  impute_finished, is_test, **kwargs)
    try:
        outputs, states = decoder.finalize(outputs, states, lengths)
    except NotImplementedError:
        pass
    if not output_time_major:
        outputs = _map(_transpose_batch_time, outputs)
    return (outputs, states, lengths) if return_length else (outputs, states)


def _keep_finished(state: Variable, new_state: Variable, finished: Variable) -> Variable:
    """``state`` where ``finished`` (per batch row), else ``new_state`` (fluid's
    impute_finished)."""
    L = _L()
    dtype = state.dtype
    is_bool = convert_dtype(dtype) == "bool"
    if is_bool:
        state, new_state = L.cast(state, "float32"), L.cast(new_state, "float32")
    mask = L.cast(finished, state.dtype)
    mask.stop_gradient = True
    out = L.elementwise_mul(state, mask, axis=0) - L.elementwise_mul(new_state, mask - 1,
                                                                     axis=0)
    return L.cast(out, dtype) if is_bool else out


def _decode_dygraph(decoder: Any, inits: Any, max_step_num: Optional[int],
                    impute_finished: bool, **kwargs: Any) -> Tuple[Any, Any, Any]:
    L = _L()
    inputs, states, finished = decoder.initialize(inits)
    lengths = L.cast(L.zeros_like(finished), "int64")
    step = 0
    per_step: List[Any] = []
    while True:
        time = L.fill_constant([1], "int64", step)
        outputs, next_states, next_inputs, next_finished = decoder.step(time, inputs, states,
                                                                        **kwargs)
        next_finished = L.logical_or(next_finished, finished)
        lengths = lengths + L.cast(L.logical_not(finished), "int64")
        if impute_finished:
            next_states = _map(lambda s, n: _keep_finished(s, n, finished), states,
                               next_states)
        per_step.append(outputs)
        inputs, states, finished = next_inputs, next_states, next_finished
        step += 1
        if bool(np.all(finished.numpy())) or (max_step_num is not None and step > max_step_num):
            break
    outputs = _pack(per_step[0], [L.stack(list(xs), axis=0)
                                  for xs in zip(*[_flatten(o) for o in per_step])])
    return outputs, states, lengths


def _decode_static(decoder: Any, inits: Any, max_step_num: Optional[int],
                   impute_finished: bool, is_test: bool, **kwargs: Any) -> Tuple[Any, Any, Any]:
    from . import control_flow as cf
    L = _L()
    init_inputs, init_states, init_finished = decoder.initialize(inits)
    global_finished = L.assign(init_finished)
    global_finished.stop_gradient = True
    step_idx = L.fill_constant([1], "int64", 0)
    cond = L.logical_not(L.reduce_all(init_finished))
    max_step = L.fill_constant([1], "int64", max_step_num) if max_step_num is not None \
        else None
    lengths = L.cast(L.zeros_like(init_finished), "int64")
    lengths.stop_gradient = True
    # inputs and states are loop-carried variables (fluid kept them in tensor arrays written at
    # step + 1 when training; the values each step reads are the same)
    inputs = _map(L.assign, init_inputs)
    states = _map(L.assign, init_states)
    prog = step_idx.block.program
    loop = cf.While(cond, is_test=is_test)
    outputs_arrays: Any = None
    with loop.block():
        outputs, next_states, next_inputs, next_finished = decoder.step(step_idx, inputs,
                                                                        states, **kwargs)
        next_finished = L.logical_or(next_finished, global_finished)
        next_lengths = L.elementwise_add(lengths, L.cast(L.logical_not(global_finished),
                                                         lengths.dtype))
        if impute_finished:
            next_states = _map(lambda s, n: _keep_finished(s, n, global_finished), states,
                               next_states)
        # output arrays are created in the parent block once the outputs' dtypes are known
        cur = prog.current_block_idx
        prog.current_block_idx = prog.current_block().parent_idx
        outputs_arrays = _map(lambda x: cf.create_array(x.dtype), outputs)
        prog.current_block_idx = cur
        _map(lambda x, a: cf.array_write(x, i=step_idx, array=a), outputs, outputs_arrays)
        cf.increment(x=step_idx, value=1.0, in_place=True)
        _map(lambda new, var: L.assign(new, var), next_inputs, inputs)
        _map(lambda new, var: L.assign(new, var), next_states, states)
        L.assign(next_finished, global_finished)
        L.assign(next_lengths, lengths)
        not_done = L.logical_not(L.reduce_all(global_finished))
        if max_step is not None:
            L.logical_and(not_done, L.less_equal(step_idx, max_step), out=cond)
        else:
            L.assign(not_done, cond)
    final_outputs = _map(lambda a: L.tensor_array_to_tensor(a, axis=0, use_stack=True)[0],
                         outputs_arrays)
    final_states = states
    return final_outputs, final_states, lengths


# constructors that append ops (padding, constants) are build transactions too
for _cls in (TrainingHelper, GreedyEmbeddingHelper, SampleEmbeddingHelper):
    _cls.__init__ = _atomic_layer(_cls.__init__)
