"""fluid 1.8's ``op_test`` module (the ``OpTest`` base of Paddle's operator unit tests) on
fluidlite, for tests/real/paddle_optests.py: that runner installs this module as ``op_test``.

The contract is fluid 1.8's (python/paddle/fluid/tests/unittests/op_test.py, release/1.8),
re-implemented here on fluidlite's Program/Executor and fluidlite.testing's gradient helpers:

* ``self.op_type``, ``self.inputs`` / ``self.outputs`` (slot -> array, ``(array, [[lens]])``
  for LoD, or for a duplicable slot a list of ``(name, value)``), ``self.attrs``. Every
  non-duplicable slot's variable is named after the slot (``X``, ``Out``), duplicable entries
  after their given names; ``None`` attributes are dropped, and so are attributes the op's
  Paddle proto does not declare (fluid's ``Operator`` skips both; see ``PADDLE_ATTRS``; for an
  op Paddle 2.6 no longer has, fluidlite's declaration stands in for fluid 1.8's proto).
* ``check_output(atol=1e-5, no_check_set, equal_nan)``: runs the one-op program on the CPU,
  compares every expected output with ``np.allclose(actual, expected, atol=atol)`` (atol 0 when
  the test's precision is float64, unless the op is in fluid's
  ``NEED_FIX_FP64_CHECK_OUTPUT_THRESHOLD_OP_LIST``), the LoD of every ``(array, lod)``
  expectation, and (fluid's ``check_compile_vs_runtime``) that each output's compile-time
  lod_level equals its run-time one.
* ``check_grad(inputs_to_check, output_names, no_grad_set, numeric_grad_delta=0.005,
  max_relative_error=0.005, user_defined_grads)``: the loss is ``mean(out)`` (several outputs:
  the mean of their means); the analytic gradients come from ``append_backward`` and the
  Executor, the numeric ones from central differences of the loss in the input's own dtype;
  both are compared with fluid's ``_assert_is_close`` criterion (float64 tests: delta 1e-5,
  max relative error 1e-7 and fluid's graded floor, unless whitelisted as in fluid).
* places: CPU only. ``core.is_compiled_with_cuda()`` is False, so fluid's ``_get_places`` is
  ``[CPUPlace]`` for float32/64 and empty for float16; ``*_with_place(CUDAPlace)`` raises
  ``unittest.SkipTest``.

Not reproduced: fluid's CI meta-checks of the test files themselves (``tearDownClass``'s
"needs check_grad with fp64", input-size >= 100, ``no_check_set`` / ``no_grad_set``
whitelists) and the dygraph re-run of every check (``check_dygraph``): the runner reports the
static checks only. ``CHECKS`` counts what ran on the CPU -- the checks above, every run of the
one-op program (``_calc_output``, which some tests check themselves) and every unittest
assertion of an OpTest (``self.assertRaises`` in a ``test_errors``) -- so the runner can tell
a test that did nothing on the CPU (a GPU-only branch) from one that passed.
"""
import random
import unittest
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from fluidlite import core
from fluidlite.backward import append_backward
from fluidlite.compiler import CompiledProgram
from fluidlite.core import names
from fluidlite.core.ir import Program, program_guard
from fluidlite.core.registry import COMMON_ATTRS, get_op_def
from fluidlite.core.scope import Scope
from fluidlite.executor import Executor
from fluidlite.op import Operator  # noqa: F401  (1.8's op_test imports it: fluid.op resolves)
from fluidlite.testing import numeric_grad

CHECKS = [0]     # checks run in this process (the runner reads it around every test)
# op type -> attribute names Paddle's OpProto declares (set by the runner from
# DIR/paddle_op_attrs.json; empty: every attribute is passed on)
PADDLE_ATTRS: Dict[str, Any] = {}


def _white_list(module: str, name: str) -> Sequence[str]:
    """fluid 1.8's op white lists (white_list/ next to the test files), empty when absent."""
    try:
        mod = __import__("white_list." + module, fromlist=[name])
    except ImportError:
        return ()
    return getattr(mod, name, ())


def randomize_probability(batch_size: int, class_num: int, dtype: str = "float32") -> np.ndarray:
    """Rows of uniform(0.1, 1) probabilities normalised to sum 1 (fluid's helper)."""
    prob = np.random.uniform(0.1, 1.0, size=(batch_size, class_num)).astype(dtype)
    return prob / prob.sum(axis=1, keepdims=True)


def skip_check_grad_ci(reason: Optional[str] = None) -> Any:
    """fluid's class decorator exempting a test from its CI's "needs check_grad" rule."""
    if not isinstance(reason, str):
        raise AssertionError("The reason for skipping check_grad is required.")

    def wrapper(cls: Any) -> Any:
        cls.no_need_check_grad = True
        return cls
    return wrapper


def _set_use_system_allocator(value: Optional[bool] = None) -> Optional[bool]:
    """fluid's allocator switch; fluidlite has one (NumPy's) allocator, so nothing changes and
    the previous value is reported as ``None``."""
    return None


def _is_array(v: Any) -> bool:
    return isinstance(v, (np.ndarray, np.generic))


def _split(value: Any) -> Tuple[np.ndarray, Optional[List[List[int]]]]:
    """``(array, lod)`` of a test value (``lod`` None without LoD)."""
    if isinstance(value, tuple):
        return np.asarray(value[0]), [list(level) for level in value[1]]
    return np.asarray(value), None


def _entries(slot: str, value: Any) -> List[Tuple[str, Any]]:
    """``[(var name, value)]`` of one slot: the slot's name, or a duplicable slot's list."""
    if isinstance(value, list):
        return [(n, v) for n, v in value]
    return [(slot, value)]


def _lod_tensor(arr: np.ndarray, lod: Optional[List[List[int]]]) -> Any:
    t = core.LoDTensor()
    t.set(arr, core.CPUPlace())
    if lod:
        t.set_recursive_sequence_lengths(lod)
    return t


class OpTest(unittest.TestCase):
    """fluid 1.8's ``OpTest`` on fluidlite (see the module docstring for the contract)."""

    @classmethod
    def setUpClass(cls) -> None:
        cls._np_rand_state = np.random.get_state()
        cls._py_rand_state = random.getstate()
        cls.call_once = False
        cls.dtype = None
        cls.outputs = {}
        np.random.seed(123)
        random.seed(124)

    @classmethod
    def tearDownClass(cls) -> None:
        np.random.set_state(cls._np_rand_state)
        random.setstate(cls._py_rand_state)

    # -- fluid's dtype rule: the test's precision is the widest input dtype -------------------
    def try_call_once(self, data_type: Any) -> None:
        if not self.call_once:
            self.call_once = True
            self.dtype = data_type

    def infer_dtype_from_inputs_outputs(self, inputs: Dict[str, Any], outputs: Any) -> None:
        found = set()
        for value in inputs.values():
            for _, v in _entries("", value):
                arr = v[0] if isinstance(v, tuple) else v
                if _is_array(arr):
                    found.add(np.dtype(arr.dtype))
        order = [np.float64, np.float32, np.float16, np.int64, np.int32, np.int16, np.int8,
                 np.uint8, np.bool_]
        for dt in order:
            if np.dtype(dt) in found:
                self.dtype = np.dtype(dt)
                break
        self.__class__.dtype = self.dtype

    def _get_places(self) -> List[Any]:
        if self.dtype == np.float16:
            return []           # fluid checks float16 on CUDA only
        return [core.CPUPlace()]

    # -- the one-op program -------------------------------------------------------------------
    def _attrs(self) -> Dict[str, Any]:
        """``self.attrs`` as fluid's ``Operator`` keeps them: no ``None`` values, and no
        attribute that Paddle's proto of the op does not declare (dropped silently by fluid)
        unless fluidlite declares it."""
        attrs = getattr(self, "attrs", None) or {}
        paddle_declared = PADDLE_ATTRS.get(self.op_type)
        opdef = get_op_def(self.op_type)
        ours = set(opdef.attr_defaults) | set(opdef.extra_attrs) | set(COMMON_ATTRS)
        if paddle_declared is None and PADDLE_ATTRS:
            # an op Paddle 2.6 no longer has (center_loss, ...): fluidlite's declaration, which
            # follows fluid 1.8's OpMaker, stands in for 1.8's proto
            paddle_declared = ours
        return {k: v for k, v in attrs.items() if v is not None and (
            paddle_declared is None or k in paddle_declared or k in ours)}

    def _append_op(self, block: Any) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        """Declare the inputs and outputs as fluid's ``append_input_output`` does and append
        the op; returns ``(feed, {slot: [var, ...]})`` of the outputs."""
        opdef = get_op_def(self.op_type)
        feed: Dict[str, Any] = {}
        ins: Dict[str, Any] = {}
        for slot, value in self.inputs.items():
            vs = []
            for name, v in _entries(slot, value):
                arr, lod = _split(v)
                vs.append(block.create_var(name=name, shape=arr.shape, dtype=arr.dtype,
                                           lod_level=len(lod) if lod else 0, is_data=True,
                                           stop_gradient=True))
                feed[name] = (arr, lod)
            ins[slot] = vs if isinstance(value, list) else vs[0]
        outs: Dict[str, Any] = {}
        declared = {s.name: s for s in opdef.out_slots}
        for slot in list(declared) + [s for s in self.outputs if s not in declared]:
            if slot in self.outputs:
                value = self.outputs[slot]
                vs = [block.create_var(name=n, dtype=_split(v)[0].dtype)
                      for n, v in _entries(slot, value)]
                outs[slot] = vs if isinstance(value, list) else vs[0]
            elif not declared[slot].dispensable and not declared[slot].duplicable:
                outs[slot] = block.create_var(name=slot)
        with program_guard(block.program, Program()):
            block.append_op(self.op_type, ins, outs, self._attrs())
        return feed, outs

    def _program(self) -> Tuple[Program, Dict[str, Any], Dict[str, Any]]:
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        prog = Program()
        feed, outs = self._append_op(prog.global_block())
        self.program = prog
        return prog, feed, outs

    @staticmethod
    def _feed(feed: Dict[str, Any]) -> Dict[str, Any]:
        return {n: (_lod_tensor(a, lod) if lod else a) for n, (a, lod) in feed.items()}

    # -- check_output -------------------------------------------------------------------------
    def _calc_output(self, place: Any, parallel: bool = False,
                     no_check_set: Optional[Sequence[str]] = None, loss: Any = None,
                     enable_inplace: Optional[bool] = None, for_inplace_test: Any = None
                     ) -> Tuple[List[Any], List[str]]:
        """fluid's ``_calc_output``: fetches ``self.fetch_list`` when the test sets one, else
        every expected output; ``parallel`` / ``enable_inplace`` run the program through a
        ``CompiledProgram`` (data parallel on the one CPU place)."""
        if isinstance(place, core.CUDAPlace):
            raise unittest.SkipTest("CUDAPlace: fluidlite runs on the CPU only")
        CHECKS[0] += 1
        prog, feed, _ = self._program()
        fetch = list(getattr(self, "fetch_list", None) or [])
        if not fetch:
            for slot, value in self.outputs.items():
                if no_check_set is not None and slot in no_check_set:
                    continue
                fetch += [n for n, _ in _entries(slot, value)]
        run_prog: Any = prog
        if parallel or enable_inplace is not None:
            run_prog = CompiledProgram(prog).with_data_parallel(
                loss_name=loss.name if loss is not None else None, places=place)
        outs = Executor(core.CPUPlace()).run(run_prog, feed=self._feed(feed), fetch_list=fetch,
                                             scope=Scope(), return_numpy=False)
        return outs, fetch

    def calc_output(self, place: Any) -> List[Any]:
        return self._calc_output(place)[0]

    def check_output_with_place(self, place: Any, atol: float = 0,
                                no_check_set: Optional[Sequence[str]] = None,
                                equal_nan: bool = False, check_dygraph: bool = True,
                                inplace_atol: Optional[float] = None
                                ) -> Tuple[List[Any], List[str]]:
        outs, fetch = self._calc_output(place, no_check_set=no_check_set)
        CHECKS[0] += 1
        if self.dtype == np.float64 and self.op_type not in _white_list(
                "op_threshold_white_list", "NEED_FIX_FP64_CHECK_OUTPUT_THRESHOLD_OP_LIST"):
            atol = 0
        got = dict(zip(fetch, outs))
        for slot, value in self.outputs.items():
            if no_check_set is not None and slot in no_check_set:
                continue
            for name, expect in _entries(slot, value):
                exp, lod = _split(expect)
                actual = got[name]
                act = np.array(actual)
                if act.size == 0:
                    # fluid 1.8's fetch op hands back an empty tensor as shape [0] (fetch_op.cc
                    # DataCopy: "Not copy, if the src tensor is empty"); fluidlite keeps the
                    # kernel's shape ([0, 6]), which the tests' empty expectations never have
                    act = act.reshape(0)
                self.assertTrue(
                    np.allclose(act, exp, atol=atol, equal_nan=equal_nan),
                    f"Output ({name}) has diff at {place}\nExpect {exp}\nBut Got {act} "
                    f"in class {type(self).__name__}")
                if lod is not None:
                    self.assertListEqual(actual.recursive_sequence_lengths(), lod,
                                         f"Output ({name}) has different lod at {place}")
        return outs, fetch

    def check_output(self, atol: float = 1e-5, no_check_set: Optional[Sequence[str]] = None,
                     equal_nan: bool = False, check_dygraph: bool = True,
                     inplace_atol: Optional[float] = None) -> None:
        self.__class__.op_type = self.op_type
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        for place in self._get_places():
            outs, fetch = self.check_output_with_place(place, atol, no_check_set, equal_nan)
            if self.op_type not in _white_list("compile_vs_runtime_white_list",
                                               "COMPILE_RUN_OP_WHITE_LIST"):
                self.check_compile_vs_runtime(fetch, outs)

    def check_compile_vs_runtime(self, fetch_list: List[str], fetch_outs: List[Any]) -> None:
        """Each fetched output's compile-time lod_level equals its run-time LoD depth."""
        block = self.program.global_block()
        for name, out in zip(fetch_list, fetch_outs):
            runtime = len(out.lod()) if isinstance(out, core.LoDTensor) else 0
            compile_ = block.var(name).lod_level or 0
            self.assertEqual(compile_, runtime,
                             f"The lod_level of Output ({name}) is different between "
                             f"compile-time and runtime ({compile_} vs {runtime})")

    def check_output_customized(self, checker: Any) -> None:
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        for place in self._get_places():
            outs = [np.array(o) for o in self.calc_output(place)]
            outs.sort(key=len)
            CHECKS[0] += 1
            checker(outs)

    # -- check_grad ---------------------------------------------------------------------------
    def _loss(self, block: Any, output_names: Sequence[str]) -> Any:
        """fluid's ``append_loss_ops``: mean of the output, or the mean of the means."""
        outs = [block.var(n) for n in output_names]
        means = []
        for o in outs:
            m = block.create_var(name=names.generate("check_grad_mean"), dtype=o.dtype)
            block.append_op("mean", {"X": o}, {"Out": m})
            means.append(m)
        if len(means) == 1:
            return means[0]
        total = block.create_var(name=names.generate("check_grad_sum"), dtype=means[0].dtype)
        block.append_op("sum", {"X": means}, {"Out": total})
        loss = block.create_var(name=names.generate("check_grad_loss"), dtype=total.dtype)
        block.append_op("scale", {"X": total}, {"Out": loss},
                        {"scale": 1.0 / float(len(means))})
        return loss

    def _gradients(self, inputs_to_check: Sequence[str], output_names: Sequence[str],
                   no_grad_set: Any, delta: float, user_defined_grads: Any
                   ) -> Tuple[List[np.ndarray], List[np.ndarray]]:
        """(numeric, analytic) gradients of the loss w.r.t. ``inputs_to_check``."""
        prog, feed, _ = self._program()
        block = prog.global_block()
        for n in inputs_to_check:
            block.var(n).stop_gradient = False
        with program_guard(prog, Program()):
            loss = self._loss(block, output_names)
        fwd = prog.clone()
        with program_guard(prog, Program()):
            append_backward(loss, parameter_list=list(inputs_to_check),
                            no_grad_set=set(no_grad_set or ()))
        exe = Executor(core.CPUPlace())
        grads = [names.grad_var_name(n) for n in inputs_to_check]
        missing = [g for g in grads if not block.has_var(g)]
        self.assertFalse(missing, f"{self.op_type}: no gradient was produced for {missing}")
        analytic = [np.array(a) for a in exe.run(prog, feed=self._feed(feed), fetch_list=grads,
                                                 scope=Scope(), return_numpy=False)]
        if user_defined_grads:
            return [np.asarray(g) for g in user_defined_grads], analytic
        numeric = [numeric_grad(self._loss_of(exe, fwd, feed, n, loss.name), {n: feed[n][0]}, n,
                                delta).astype(feed[n][0].dtype) for n in inputs_to_check]
        return numeric, analytic

    def _get_gradient(self, input_to_check: Sequence[str], place: Any,
                      output_names: Any, no_grad_set: Any, parallel: bool = False
                      ) -> List[np.ndarray]:
        """fluid's ``_get_gradient``: the analytic gradients of the mean of ``output_names``
        w.r.t. ``input_to_check`` (``parallel``: through a data-parallel CompiledProgram)."""
        if isinstance(place, core.CUDAPlace):
            raise unittest.SkipTest("CUDAPlace: fluidlite runs on the CPU only")
        CHECKS[0] += 1
        if not isinstance(output_names, list):
            output_names = [output_names]
        prog, feed, _ = self._program()
        block = prog.global_block()
        for n in input_to_check:
            block.var(n).stop_gradient = False
        with program_guard(prog, Program()):
            loss = self._loss(block, output_names)
            append_backward(loss, parameter_list=list(input_to_check),
                            no_grad_set=set(no_grad_set or ()))
        run_prog: Any = prog
        if parallel:
            run_prog = CompiledProgram(prog).with_data_parallel(loss_name=loss.name,
                                                                places=place)
        grads = [names.grad_var_name(n) for n in input_to_check]
        outs = Executor(core.CPUPlace()).run(run_prog, feed=self._feed(feed), fetch_list=grads,
                                             scope=Scope(), return_numpy=False)
        return [np.array(g) for g in outs]

    def _loss_of(self, exe: Executor, fwd: Program, feed: Dict[str, Any], name: str,
                 loss: str) -> Any:
        """``f(fd) -> float``: the loss with input ``name`` replaced by ``fd[name]`` (cast to
        its dtype). Without LoD the Executor's per-step runner is used (thousands of runs for
        one numeric gradient); with LoD, ``Executor.run``."""
        arr = feed[name][0]

        def f(fd: Dict[str, np.ndarray]) -> float:
            cur = dict(feed)
            cur[name] = (fd[name].astype(arr.dtype), feed[name][1])
            out = exe.run(fwd, feed=self._feed(cur), fetch_list=[loss], scope=Scope())
            return float(np.asarray(out[0]).reshape(-1)[0])
        if any(lod for _, lod in feed.values()):
            return f
        order = list(feed)
        try:
            run = exe._runner(fwd, order, [loss], Scope())
        except ValueError:          # a LoD-aware op: the per-step runner does not take it
            return f
        base = [feed[n][0] for n in order]
        at = order.index(name)

        def fast(fd: Dict[str, np.ndarray]) -> float:
            args = list(base)
            args[at] = np.ascontiguousarray(fd[name].astype(arr.dtype))
            return float(np.asarray(run(args)[0]).reshape(-1)[0])
        return fast

    def _assert_is_close(self, numeric_grads: Sequence[np.ndarray],
                         analytic_grads: Sequence[np.ndarray], names_: Sequence[str],
                         max_relative_error: float, msg_prefix: str) -> None:
        fp64_graded = self.dtype == np.float64 and self.op_type not in _white_list(
            "op_threshold_white_list", "NEED_FIX_FP64_CHECK_GRAD_THRESHOLD_OP_LIST")
        for a, b, name in zip(numeric_grads, analytic_grads, names_):
            a = np.asarray(a, dtype=np.float64)
            b = np.asarray(b, dtype=np.float64)
            abs_a = np.abs(a)
            if fp64_graded:
                abs_a[abs_a < 1e-10] = 1e-3
                abs_a[np.logical_and(abs_a > 1e-10, abs_a <= 1e-8)] *= 1e4
                abs_a[np.logical_and(abs_a > 1e-8, abs_a <= 1e-6)] *= 1e2
            else:
                abs_a[abs_a < 1e-3] = 1
            self.assertEqual(a.shape, b.shape, f"{self.op_type}: gradient of {name} has shape "
                                               f"{b.shape}, the numeric one {a.shape}")
            diff = np.abs(a - b) / abs_a
            max_diff = float(np.max(diff)) if diff.size else 0.0
            at = int(np.argmax(diff > max_relative_error)) if diff.size else 0
            self.assertLessEqual(
                max_diff, max_relative_error,
                f"{self.op_type} error, {msg_prefix} variable {name} max gradient diff "
                f"{max_diff:f} over limit {max_relative_error:f}, the first error element is "
                f"{at}, expected {a.flatten()[at] if a.size else 0:f}, but got "
                f"{b.flatten()[at] if b.size else 0:f}.")

    def _check_grad_helper(self) -> None:
        """fluid's bookkeeping before a gradient check (the test's dtype, its class flags)."""
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        self.__class__.op_type = self.op_type
        self.__class__.exist_check_grad = True
        if self.dtype == np.float64:
            self.__class__.exist_fp64_check_grad = True

    def check_grad(self, inputs_to_check: Sequence[str], output_names: Any,
                   no_grad_set: Any = None, numeric_grad_delta: float = 0.005,
                   in_place: bool = False, max_relative_error: float = 0.005,
                   user_defined_grads: Any = None, check_dygraph: bool = True) -> None:
        self.__class__.op_type = self.op_type
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        for place in self._get_places():
            self.check_grad_with_place(place, inputs_to_check, output_names, no_grad_set,
                                       numeric_grad_delta, in_place, max_relative_error,
                                       user_defined_grads)

    def check_grad_with_place(self, place: Any, inputs_to_check: Sequence[str],
                              output_names: Any, no_grad_set: Any = None,
                              numeric_grad_delta: float = 0.005, in_place: bool = False,
                              max_relative_error: float = 0.005, user_defined_grads: Any = None,
                              check_dygraph: bool = True) -> None:
        if isinstance(place, core.CUDAPlace):
            raise unittest.SkipTest("CUDAPlace: fluidlite runs on the CPU only")
        self.infer_dtype_from_inputs_outputs(self.inputs, self.outputs)
        if self.dtype == np.float64 and self.op_type not in _white_list(
                "op_threshold_white_list", "NEED_FIX_FP64_CHECK_GRAD_THRESHOLD_OP_LIST"):
            numeric_grad_delta, max_relative_error = 1e-5, 1e-7
        if not isinstance(output_names, list):
            output_names = [output_names]
        CHECKS[0] += 1
        numeric, analytic = self._gradients(list(inputs_to_check), output_names, no_grad_set,
                                            numeric_grad_delta, user_defined_grads)
        self._assert_is_close(numeric, analytic, inputs_to_check, max_relative_error,
                              f"Gradient Check On {place}")

    # -- fluid's helpers for sequence tests ---------------------------------------------------
    def get_sequence_batch_size_1_input(self, lod: Any = None, shape: Any = None) -> Any:
        lod = [[13]] if lod is None else lod
        shape = [13, 23] if shape is None else shape
        assert len(lod[0]) == 1 and lod[0][0] == shape[0]
        return np.random.uniform(0.1, 1, shape).astype("float32"), lod

    def lod_has_single_zero(self, lod: Sequence[int]) -> bool:
        return any(lod[i] != 0 and lod[i + 1] == 0 and lod[i + 2] != 0
                   for i in range(len(lod) - 2))

    def lod_has_continuous_zero(self, lod: Sequence[int]) -> bool:
        return any(lod[i] != 0 and lod[i + 1] == 0 and lod[i + 2] == 0 and lod[i + 3] != 0
                   for i in range(len(lod) - 3))

    def get_sequence_instance_size_0_input(self, lod: Any = None, shape: Any = None) -> Any:
        lod = [[0, 0, 4, 0, 3, 0, 0, 5, 0, 0]] if lod is None else lod
        shape = [12, 10] if shape is None else shape
        assert len(lod[0]) >= 8 and lod[0][:2] == [0, 0] and lod[0][-2:] == [0, 0]
        assert self.lod_has_single_zero(lod[0]) and self.lod_has_continuous_zero(lod[0])
        assert sum(lod[0]) == shape[0]
        return np.random.uniform(0.1, 1, shape).astype("float32"), lod

    @staticmethod
    def np_dtype_to_fluid_dtype(input: np.ndarray) -> np.ndarray:
        return input

    @staticmethod
    def np_value_to_fluid_value(input: np.ndarray) -> np.ndarray:
        return input

    def fluid_dtype_to_np_dtype(self, dtype: Any) -> Any:
        return dtype


def _counted(name: str) -> Any:
    """unittest's assertion ``name``, counted in ``CHECKS`` (it ran on the CPU)."""
    method = getattr(unittest.TestCase, name)

    def assertion(self: Any, *args: Any, **kwargs: Any) -> Any:
        CHECKS[0] += 1
        return method(self, *args, **kwargs)
    assertion.__name__ = assertion.__qualname__ = name
    assertion.__doc__ = method.__doc__
    return assertion


for _name in [n for n in vars(unittest.TestCase) if n.startswith("assert") and "_" not in n]:
    setattr(OpTest, _name, _counted(_name))
