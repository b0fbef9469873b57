"""``fluid.metrics.DetectionMAP`` (fluid 1.8): the mAP of the current batch and the mAP
accumulated over every batch since the last ``reset``, both computed inside the program by
``detection_map`` ops; the accumulators are persistable variables of the program."""
from __future__ import annotations

from typing import Any, Optional, Tuple

from .. import unique_name
from ..core.ir import Program, Variable, program_guard

__all__ = ["DetectionMAP"]


class DetectionMAP:
    """Build the mAP ops for detections ``input`` (``multiclass_nms`` output) and the ground
    truth ``gt_label`` / ``gt_box`` (/ ``gt_difficult``), as fluid 1.8 does:
    ``get_map_var()`` returns ``(cur_map, accum_map)``; ``reset(exe)`` restarts accumulation.

    Args:
        input (Variable): detections ``[M, 6]`` (label, score, box) with LoD per image, as
            ``multiclass_nms`` returns them.
        gt_label (Variable): ground-truth labels ``[G, 1]`` with LoD per image.
        gt_box (Variable): ground-truth boxes ``[G, 4]`` with LoD per image.
        gt_difficult (Variable | None): ``[G, 1]`` difficult flags.
        class_num (int | None): the number of classes.
        background_label (int, default 0): the background class (ignored).
        overlap_threshold (float, default 0.5): IoU for a detection to count as a match.
        evaluate_difficult (bool, default True): count difficult ground truths.
        ap_version (str, default "integral"): ``"integral"`` or ``"11point"``.

    Returns:
        DetectionMAP: the evaluator; its ops are in the current main program, its zero-filled
        accumulators in the current startup program.

    Raises:
        TypeError: ``input``, ``gt_label``, ``gt_box`` or ``gt_difficult`` is not a Variable, or
            ``input`` is not float32/float64.
        ValueError: ``ap_version`` is not ``"integral"`` / ``"11point"``, or ``class_num`` is not a
            positive int (None included: the number of classes is required).

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     det = fluid.data("det", [-1, 6], lod_level=1)    # label, score, box
        ...     gt_label = fluid.data("gt_label", [-1, 1], lod_level=1)
        ...     gt_box = fluid.data("gt_box", [-1, 4], lod_level=1)
        ...     m = fluid.metrics.DetectionMAP(det, gt_label, gt_box, class_num=2)
        ...     cur_map, accum_map = m.get_map_var()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> _ = exe.run(startup)
        >>> place = fluid.CPUPlace()
        >>> feed = {"det": fluid.create_lod_tensor(np.array([[1, 0.9, 0, 0, 1, 1]], "float32"), [[1]], place),
        ...         "gt_label": fluid.create_lod_tensor(np.array([[1]], "float32"), [[1]], place),
        ...         "gt_box": fluid.create_lod_tensor(np.array([[0, 0, 1, 1]], "float32"), [[1]], place)}
        >>> exe.run(main, feed=feed, fetch_list=[cur_map])[0]
        array([1.], dtype=float32)
    """

    def __init__(self, input: Variable, gt_label: Variable, gt_box: Variable,
                 gt_difficult: Optional[Variable] = None, class_num: Optional[int] = None,
                 background_label: int = 0, overlap_threshold: float = 0.5,
                 evaluate_difficult: bool = True, ap_version: str = "integral") -> None:
        from .. import layers
        from ..initializer import Constant
        from ..layer_helper import LayerHelper
        self.helper = LayerHelper("map_eval")
        gt_label = layers.cast(x=gt_label, dtype=gt_box.dtype)
        if gt_difficult is not None:
            gt_difficult = layers.cast(x=gt_difficult, dtype=gt_box.dtype)
            label = layers.concat([gt_label, gt_difficult, gt_box], axis=1)
        else:
            label = layers.concat([gt_label, gt_box], axis=1)
        cur = layers.detection_map(input, label, class_num, background_label,
                                   overlap_threshold=overlap_threshold,
                                   evaluate_difficult=evaluate_difficult,
                                   ap_version=ap_version)
        states = [self._create_state("accum_pos_count", "int32", None),
                  self._create_state("accum_true_pos", "float32", None),
                  self._create_state("accum_false_pos", "float32", None)]
        # fluid's executor creates these in the scope on first use; fluidlite runs only
        # initialized persistables, so the startup program zero-fills them (read only once
        # has_state is 1, i.e. after they have been written)
        for var, shape in zip(states, ([class_num or 1, 1], [1, 2], [1, 2])):
            self._zero_init(var, shape)
        self.states = states          # the accumulators (fluid.evaluator.DetectionMAP's states)
        has_state = self._create_state("has_state", "int32", [1])
        self.helper.set_variable_initializer(has_state, initializer=Constant(value=0))
        self.has_state = has_state
        accum = layers.detection_map(input, label, class_num, background_label,
                                     overlap_threshold=overlap_threshold,
                                     evaluate_difficult=evaluate_difficult,
                                     has_state=has_state, input_states=states,
                                     out_states=states, ap_version=ap_version)
        layers.fill_constant(shape=has_state.shape, value=1, dtype=has_state.dtype,
                             out=has_state)
        self.cur_map, self.accum_map = cur, accum

    def _create_state(self, suffix: str, dtype: str, shape: Any) -> Variable:
        name = "_".join([unique_name.generate(self.helper.name), suffix])
        kwargs = {"name": name, "persistable": True, "dtype": dtype}
        if shape is not None:
            kwargs["shape"] = shape
        return self.helper.create_variable(**kwargs)

    def _zero_init(self, var: Variable, shape: Any) -> None:
        block = self.helper.startup_program.global_block()
        out = block.create_var(name=var.name, shape=shape, dtype=var.dtype, persistable=True)
        block.append_op("fill_constant", outputs={"Out": out},
                        attrs={"shape": list(shape), "dtype": var.dtype, "value": 0.0})

    def get_map_var(self) -> Tuple[Variable, Variable]:
        """``(cur_map, accum_map)``: this batch's mAP and the accumulated one.

        Args:
            None: this method takes no arguments.

        Returns:
            tuple: ``(cur_map, accum_map)``, two float32 Variables of shape [1].

        Raises:
            None: this accessor does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     det = fluid.data("det", [-1, 6], lod_level=1)          # label, score, box
            ...     gt_label = fluid.data("gt_label", [-1, 1], lod_level=1)
            ...     gt_box = fluid.data("gt_box", [-1, 4], lod_level=1)
            ...     m = fluid.metrics.DetectionMAP(det, gt_label, gt_box, class_num=2)
            ...     cur_map, accum_map = m.get_map_var()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> place = fluid.CPUPlace()
            >>> t = lambda a, n: fluid.create_lod_tensor(np.array(a, "float32"), [[n]], place)
            >>> hit = {"det": t([[1, 0.9, 0, 0, 1, 1]], 1), "gt_label": t([[1]], 1),
            ...        "gt_box": t([[0, 0, 1, 1]], 1)}
            >>> miss = {"det": t([[1, 0.9, 5, 5, 6, 6]], 1), "gt_label": t([[1]], 1),
            ...         "gt_box": t([[0, 0, 1, 1]], 1)}
            >>> [exe.run(main, feed=f, fetch_list=[cur_map, accum_map]) for f in (hit, miss)]
            [[array([1.], dtype=float32), array([1.], dtype=float32)], [array([0.], dtype=float32), array([0.5], dtype=float32)]]
        """
        return self.cur_map, self.accum_map

    def reset(self, executor: Any, reset_program: Optional[Program] = None) -> None:
        """Zero ``has_state`` so that the next run starts a new accumulation.

        Args:
            executor (Executor): the executor whose scope holds the accumulators.
            reset_program (Program | None): the program to add the reset op to; None builds a new
                one. Default None.

        Returns:
            None.

        Raises:
            AttributeError: ``executor`` has no ``run`` method.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     det = fluid.data("det", [-1, 6], lod_level=1)          # label, score, box
            ...     gt_label = fluid.data("gt_label", [-1, 1], lod_level=1)
            ...     gt_box = fluid.data("gt_box", [-1, 4], lod_level=1)
            ...     m = fluid.metrics.DetectionMAP(det, gt_label, gt_box, class_num=2)
            ...     cur_map, accum_map = m.get_map_var()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> _ = exe.run(startup)
            >>> place = fluid.CPUPlace()
            >>> t = lambda a, n: fluid.create_lod_tensor(np.array(a, "float32"), [[n]], place)
            >>> hit = {"det": t([[1, 0.9, 0, 0, 1, 1]], 1), "gt_label": t([[1]], 1),
            ...        "gt_box": t([[0, 0, 1, 1]], 1)}
            >>> miss = {"det": t([[1, 0.9, 5, 5, 6, 6]], 1), "gt_label": t([[1]], 1),
            ...         "gt_box": t([[0, 0, 1, 1]], 1)}
            >>> _ = exe.run(main, feed=hit, fetch_list=[accum_map])
            >>> m.reset(exe)                       # start accumulating again
            >>> exe.run(main, feed=miss, fetch_list=[accum_map])[0]
            array([0.], dtype=float32)
        """
        from .. import layers
        if reset_program is None:
            reset_program = Program()
        with program_guard(main_program=reset_program):
            var = reset_program.current_block().create_var(
                name=self.has_state.name, shape=self.has_state.shape,
                dtype=self.has_state.dtype, persistable=True)
            layers.fill_constant(shape=var.shape, value=0, dtype=var.dtype, out=var)
        executor.run(reset_program)
