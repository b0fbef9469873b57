"""``fluid.layers`` beam-search layers on ``ops/beam_search.py``: ``gather_tree``,
``beam_search`` and ``beam_search_decode`` (fluid 1.8 signatures)."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from ..core.dtypes import VarType
from ..core.ir import Variable
from ..layer_helper import LayerHelper, check_int
from ..pipeline.feeder import check_dtype
from .rnn import _var

__all__ = ["gather_tree", "beam_search", "beam_search_decode"]


def gather_tree(ids: Variable, parents: Variable) -> Variable:
    """The full id sequences ending in each beam: backtrace ``parents`` from the last step
    (``ids``, ``parents``: [max_time, batch_size, beam_size] int64).

    Args:
        ids (Variable): int64 [max_time, batch_size, beam_size], the id chosen at each step.
        parents (Variable): int64 [max_time, batch_size, beam_size], the beam each id extended.
    Returns:
        Variable: [max_time, batch_size, beam_size], the full id sequence of every final beam,
        dtype of ``ids``.
    Raises:
        TypeError: ``ids`` or ``parents`` is not a Variable.
        ValueError: ``ids`` and ``parents`` differ in shape (shape inference).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     ids = fluid.data("ids", [3, 1, 2], "int64")          # [time, batch, beam]
        ...     parents = fluid.data("parents", [3, 1, 2], "int64")
        ...     out = fluid.layers.gather_tree(ids, parents)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> feed = {"ids": np.array([[[1, 2]], [[3, 4]], [[5, 6]]], "int64"),
        ...         "parents": np.array([[[0, 0]], [[1, 0]], [[1, 0]]], "int64")}
        >>> exe.run(main, feed=feed, fetch_list=[out])[0][:, 0, :]
        array([[1, 2],
               [4, 3],
               [5, 6]])
    """
    _var(ids, "ids", "gather_tree")
    _var(parents, "parents", "gather_tree")
    check_dtype(ids.dtype, "ids", ["int32", "int64"], "gather_tree")        # fluid 1.8's
    check_dtype(parents.dtype, "parents", ["int32", "int64"], "gather_tree")
    helper = LayerHelper("gather_tree")
    out = helper.create_variable_for_type_inference(ids.dtype, stop_gradient=True)
    helper.append_op(type="gather_tree", inputs={"Ids": ids, "Parents": parents},
                     outputs={"Out": out})
    return out


def beam_search(pre_ids: Variable, pre_scores: Variable, ids: Optional[Variable],
                scores: Variable, beam_size: int, end_id: int, level: int = 0,
                is_accumulated: bool = True, name: Optional[str] = None,
                return_parent_idx: bool = False
                ) -> Union[Tuple[Variable, Variable], Tuple[Variable, Variable, Variable]]:
    """One step of LoD beam search (op ``beam_search``): returns ``(selected_ids,
    selected_scores)`` and, with ``return_parent_idx``, the prefix row of each selected
    candidate.

    Args:
        pre_ids (Variable): int64 [batch * beam, 1] LoD tensor, the ids chosen at the previous
            step (2 levels of LoD: sources, then prefixes).
        pre_scores (Variable): float [batch * beam, 1], their (accumulated) scores.
        ids (Variable | None): int64 [batch * beam, K] candidate ids, or None: the candidates
            are the column indices of ``scores``.
        scores (Variable): float [batch * beam, K] candidate scores, LoD as ``pre_ids``.
        beam_size (int): the beams kept per source (>= 1).
        end_id (int): the id that ends a beam.
        level (int, default 0): the LoD level of the sources (>= 0).
        is_accumulated (bool, default True): ``scores`` already add the prefix scores; False
            adds ``log(scores)`` to ``pre_scores``.
        name (str | None, default None): name prefix of the outputs.
        return_parent_idx (bool, default False): also return the parent row of each selection.
    Returns:
        tuple of Variable: ``(selected_ids, selected_scores)`` (int64 and ``scores``' dtype,
        [num_selected, 1] with LoD), plus int32 ``parent_idx`` with ``return_parent_idx``.
    Raises:
        TypeError: ``pre_ids``, ``pre_scores``, ``scores`` or a given ``ids`` is not a
            Variable, or ``beam_size`` / ``end_id`` / ``level`` is not an int.
        ValueError: ``beam_size`` is below 1, or ``level`` is negative.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     pre_ids = fluid.data("pre_ids", [-1, 1], "int64", lod_level=2)
        ...     pre_scores = fluid.data("pre_scores", [-1, 1], lod_level=2)
        ...     # accumulated scores of 4 candidate words
        ...     scores = fluid.data("scores", [-1, 4], lod_level=2)
        ...     ids, sc = fluid.layers.beam_search(pre_ids, pre_scores, None, scores, beam_size=2, end_id=0)
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> place = fluid.CPUPlace()
        >>> lod = [[1], [1]]                                     # one source, one prefix
        >>> feed = {"pre_ids": fluid.create_lod_tensor(np.array([[2]], "int64"), lod, place),
        ...         "pre_scores": fluid.create_lod_tensor(np.array([[0.0]], "float32"), lod, place),
        ...         "scores": fluid.create_lod_tensor(np.array([[0.1, 0.5, 0.3, 0.9]], "float32"), lod, place)}
        >>> exe.run(main, feed=feed, fetch_list=[ids])[0].ravel()      # the 2 best words
        array([3, 1])
    """
    for arg, v in (("pre_ids", pre_ids), ("pre_scores", pre_scores), ("scores", scores)):
        _var(v, arg, "beam_search")
    if ids is not None:
        _var(ids, "ids", "beam_search")
    beam_size = check_int(beam_size, "beam_size", "beam_search", minimum=1)
    end_id = check_int(end_id, "end_id", "beam_search")
    level = check_int(level, "level", "beam_search", minimum=0)
    helper = LayerHelper("beam_search", name=name)
    sel_ids = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    sel_scores = helper.create_variable_for_type_inference(scores.dtype, stop_gradient=True)
    parent = helper.create_variable_for_type_inference(VarType.INT32, stop_gradient=True)
    inputs = {"pre_ids": pre_ids, "pre_scores": pre_scores, "scores": scores}
    if ids is not None:
        inputs["ids"] = ids
    helper.append_op(type="beam_search", inputs=inputs,
                     outputs={"selected_ids": sel_ids, "selected_scores": sel_scores,
                              "parent_idx": parent},
                     attrs={"level": level, "beam_size": beam_size, "end_id": end_id,
                            "is_accumulated": bool(is_accumulated)})
    if return_parent_idx:
        return sel_ids, sel_scores, parent
    return sel_ids, sel_scores


def beam_search_decode(ids: Variable, scores: Variable, beam_size: int, end_id: int,
                       name: Optional[str] = None) -> Tuple[Variable, Variable]:
    """The sentences of a finished beam search, backtracked from every step's selections.

    Step ``t`` of ``ids`` / ``scores`` is what ``beam_search`` selected at that step: a LoD
    tensor ``[K_t, 1]`` whose LoD maps sources to prefixes and prefixes to their selected
    candidates. Each prefix is followed back to its source's start; a sentence ends at
    ``end_id`` or at the last step. Its score is the (accumulated) score of its last token.

    Args:
        ids (Variable): a LoDTensorArray (``create_array("int64")``) of the selected ids per step.
        scores (Variable): a LoDTensorArray (float32) of the selected scores per step, with the
            same LoD as ``ids``.
        beam_size (int): the beam width used in the search (>= 1).
        end_id (int): the end-of-sentence id.
        name (str, optional): a name prefix for the outputs. Default None.

    Returns:
        tuple(Variable, Variable): ``(sentence_ids, sentence_scores)``: int64 and float32, 1-D,
        with a 2-level LoD (sources -> sentences, sentences -> tokens), each source's best
        sentence first; ``sentence_scores`` holds each token's step score.

    Raises:
        TypeError: ``ids`` or ``scores`` is not a Variable, or ``beam_size`` / ``end_id`` is
            not an int.
        ValueError: ``beam_size`` < 1.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> steps = [([0], [0.0], [[1], [1]]),                  # the start token
        ...          ([5, 7], [-0.1, -0.2], [[1], [2]]),        # two candidates of one prefix
        ...          ([1, 9], [-0.15, -0.25], [[2], [1, 1]])]   # "5" ends (id 1), "7" goes on
        >>> main = fluid.Program()
        >>> with fluid.program_guard(main, fluid.Program()):
        ...     ids_arr = fluid.layers.create_array("int64")
        ...     scores_arr = fluid.layers.create_array("float32")
        ...     for t in range(len(steps)):
        ...         i = fluid.layers.fill_constant([1], "int64", t)
        ...         _ = fluid.layers.array_write(
        ...             fluid.data(f"ids{t}", [-1, 1], "int64", lod_level=2), i, ids_arr)
        ...         _ = fluid.layers.array_write(
        ...             fluid.data(f"sc{t}", [-1, 1], lod_level=2), i, scores_arr)
        ...     sent_ids, sent_scores = fluid.layers.beam_search_decode(
        ...         ids_arr, scores_arr, beam_size=2, end_id=1)
        >>> place = fluid.CPUPlace()
        >>> feed = {}
        >>> for t, (ids, sc, lens) in enumerate(steps):
        ...     feed[f"ids{t}"] = fluid.create_lod_tensor(
        ...         np.array(ids, "int64").reshape(-1, 1), lens, place)
        ...     feed[f"sc{t}"] = fluid.create_lod_tensor(
        ...         np.array(sc, "float32").reshape(-1, 1), lens, place)
        >>> out_ids, out_scores = fluid.Executor(place).run(
        ...     main, feed=feed, fetch_list=[sent_ids, sent_scores], return_numpy=False)
        >>> np.asarray(out_ids), out_ids.recursive_sequence_lengths()
        (array([0, 5, 1, 0, 7, 9]), [[2], [3, 3]])
        >>> np.asarray(out_scores)
        array([ 0.  , -0.1 , -0.15,  0.  , -0.2 , -0.25], dtype=float32)
    """
    _var(ids, "ids", "beam_search_decode")
    _var(scores, "scores", "beam_search_decode")
    beam_size = check_int(beam_size, "beam_size", "beam_search_decode", minimum=1)
    end_id = check_int(end_id, "end_id", "beam_search_decode")
    helper = LayerHelper("beam_search_decode", name=name)
    sent_ids = helper.create_variable_for_type_inference(VarType.INT64, stop_gradient=True)
    sent_scores = helper.create_variable_for_type_inference(VarType.FP32, stop_gradient=True)
    helper.append_op(type="beam_search_decode", inputs={"Ids": ids, "Scores": scores},
                     outputs={"SentenceIds": sent_ids, "SentenceScores": sent_scores},
                     attrs={"beam_size": beam_size, "end_id": end_id})
    return sent_ids, sent_scores
