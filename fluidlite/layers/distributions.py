"""``fluid.layers.distributions``: Uniform, Normal, Categorical and MultivariateNormalDiag as
fluid 1.8 defines them. Every method builds ordinary layers (so it works in static programs and
in dygraph alike) and returns a Variable.

Parameters given as Python floats, lists or NumPy arrays become float32 constants broadcast
against each other (``assign``); parameters given as Variables are used as they are (then all
of them must be Variables, as in fluid). Results keep the parameters' batch shape: e.g.
``Normal([0.], [1.]).entropy()`` has shape [1], ``Normal(0., [1., 2.]).log_prob(v)`` the
broadcast of v and [2].
"""
from __future__ import annotations

import math
import warnings
from typing import Any, List, Sequence, Tuple

import numpy as np

from ..core.ir import Variable

__all__ = ["Uniform", "Normal", "Categorical", "MultivariateNormalDiag"]

_LOG_2PI = math.log(2.0 * math.pi)


def _L() -> Any:
    from .. import layers     # the package (imported lazily: this module is part of it)
    return layers


class Distribution:
    """Base class: ``sample``, ``entropy``, ``log_prob`` and ``kl_divergence`` as each
    distribution defines them (fluid 1.8 does not define every method for every
    distribution: the missing ones say so)."""

    def sample(self, shape: Sequence[int], seed: int = 0) -> Variable:
        raise NotImplementedError(f"{type(self).__name__} has no sample() in fluid 1.8")

    def entropy(self) -> Variable:
        raise NotImplementedError(f"{type(self).__name__} has no entropy() in fluid 1.8")

    def log_prob(self, value: Variable) -> Variable:
        raise NotImplementedError(f"{type(self).__name__} has no log_prob() in fluid 1.8")

    def kl_divergence(self, other: "Distribution") -> Variable:
        raise NotImplementedError(f"{type(self).__name__} has no kl_divergence() in fluid 1.8")

    # -- argument handling ------------------------------------------------------------------
    @staticmethod
    def _validate_args(*args: Any) -> bool:
        """True when the parameters are Variables (then every one must be)."""
        is_var = [isinstance(a, Variable) for a in args]
        if any(is_var) and not all(is_var):
            raise ValueError("if one argument is a Variable (Tensor), all arguments should be "
                             "Variables")
        return all(is_var)

    @staticmethod
    def _to_variable(*args: Any) -> Tuple[Variable, ...]:
        """Python floats / lists / arrays -> float32 constants broadcast to a common shape."""
        arrays = []
        for i, a in enumerate(args):
            if isinstance(a, bool) or not isinstance(a, (float, int, list, tuple, np.ndarray)):
                raise TypeError(f"distribution parameter {i} must be a float, list, "
                                f"numpy.ndarray or Variable, but received {type(a).__name__}")
            arr = np.zeros(1) + a if isinstance(a, (float, int)) else np.array(a)
            if arr.dtype != np.float32:
                if arr.dtype != np.float64 and arr.dtype.kind != "i":
                    warnings.warn("distribution parameters are float32; converting "
                                  f"{arr.dtype} to float32", stacklevel=3)
                arr = arr.astype(np.float32)
            arrays.append(arr)
        try:
            arrays = np.broadcast_arrays(*arrays)
        except ValueError:
            raise ValueError(f"distribution parameters of shapes "
                             f"{[list(a.shape) for a in arrays]} cannot be broadcast "
                             f"together") from None
        return tuple(_L().assign(np.ascontiguousarray(a)) for a in arrays)

    @staticmethod
    def _check_value(value: Any, method: str) -> None:
        if not isinstance(value, Variable):
            raise TypeError(f"{method}: value must be a Variable, but received "
                            f"{type(value).__name__}; wrap data with fluid.layers.assign or "
                            f"fluid.dygraph.to_variable")

    @staticmethod
    def _like(param: Variable, value: Variable) -> Variable:
        """``param`` in ``value``'s dtype (log_prob returns the value's dtype)."""
        return param if param.dtype == value.dtype else _L().cast(param, value.dtype)


def _sample_shape(shape: Any, seed: Any) -> Tuple[List[int], int]:
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(d, (int, np.integer)) and not isinstance(d, bool) for d in shape):
        raise TypeError(f"sample: shape must be a list of ints, but received {shape!r}")
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
        raise TypeError(f"sample: seed must be an int, but received {seed!r}")
    return [int(d) for d in shape], int(seed)


class _LocScale(Distribution):
    """Shared construction of the two-parameter distributions."""

    def _init_params(self, a: Any, b: Any) -> Tuple[Variable, Variable]:
        self.all_arg_is_float = False
        self.batch_size_unknown = False
        if self._validate_args(a, b):
            self.batch_size_unknown = True
            return a, b
        if isinstance(a, float) and isinstance(b, float):
            self.all_arg_is_float = True
        return self._to_variable(a, b)

    def _noise(self, shape: List[int], seed: int, like: Variable, uniform: bool) -> Variable:
        """Standard noise of shape ``shape + batch_shape`` (batch dim from ``like`` when it
        is unknown)."""
        L = _L()
        batch = list(like.shape)
        if any(d < 0 for d in batch):
            if uniform:
                return L.uniform_random_batch_size_like(like, batch + shape, min=0.0, max=1.0,
                                                        seed=seed)
            return L.gaussian_random_batch_size_like(like, batch + shape, mean=0.0, std=1.0,
                                                     seed=seed)
        if uniform:
            return L.uniform_random(shape + batch, min=0.0, max=1.0, seed=seed)
        return L.gaussian_random(shape + batch, mean=0.0, std=1.0, seed=seed)

    @staticmethod
    def _axis(noise: Variable, param: Variable) -> int:
        """Where ``param`` lines up in ``noise``: at the start when the batch dim is unknown
        (noise is batch_shape + shape), else at the end (noise is shape + batch_shape)."""
        return 0 if any(d < 0 for d in param.shape) else -1

    def _finish(self, out: Variable, shape: List[int]) -> Variable:
        # two Python floats describe one scalar distribution: samples have exactly ``shape``
        return _L().reshape(out, shape) if self.all_arg_is_float else out


class Uniform(_LocScale):
    """Uniform distribution on [low, high): pdf = 1 / (high - low).

    Args:
        low (float | list | numpy.ndarray | Variable): the lower bound.
        high (float | list | numpy.ndarray | Variable): the upper bound (exclusive).
    Returns:
        Uniform: the distribution; ``sample``, ``entropy`` and ``log_prob`` build its Variables.
    Raises:
        TypeError: a parameter is not a float, list, numpy.ndarray or Variable.
        ValueError: one parameter is a Variable and the other is not, or the parameters cannot
            be broadcast together.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     dist = fluid.layers.Uniform(low=0.0, high=4.0)
        ...     ent = dist.entropy()
        ...     p = dist.log_prob(fluid.layers.assign(np.array([1.0], "float32")))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [a.round(4) for a in exe.run(main, fetch_list=[ent, p])]             # log 4, -log 4
        [array([1.3863], dtype=float32), array([-1.3863], dtype=float32)]
    """

    def __init__(self, low: Any, high: Any) -> None:
        self.low, self.high = self._init_params(low, high)

    def sample(self, shape: Sequence[int], seed: int = 0) -> Variable:
        """Samples of shape ``shape + batch_shape`` (``batch_shape + shape`` when the batch
        dim is unknown, as fluid): low + (high - low) * U[0, 1).

        Args:
            shape (list of int): the sample shape, prepended to the batch shape.
            seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
        Returns:
            Variable: the samples, ``shape + batch_shape`` (see above), dtype of the parameters.
        Raises:
            TypeError: ``shape`` is not a list of ints, or ``seed`` is not an int.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     s = fluid.layers.Uniform(low=-1.0, high=1.0).sample([100], seed=1)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> v, = exe.run(main, fetch_list=[s])
            >>> v.shape, bool(((v >= -1) & (v < 1)).all())
            ((100,), True)
        """
        L = _L()
        shape, seed = _sample_shape(shape, seed)
        width = L.elementwise_sub(self.high, self.low)
        u = self._noise(shape, seed, L.elementwise_add(self.low, self.high), uniform=True)
        ax = self._axis(u, width)
        return self._finish(L.elementwise_add(L.elementwise_mul(u, width, axis=ax), self.low,
                                              axis=ax), shape)

    def entropy(self) -> Variable:
        """log(high - low).

        Args:
            None: this method takes no arguments.
        Returns:
            Variable: the entropy, in the batch shape of ``low`` and ``high``.
        Raises:
            None: the parameters were checked by the constructor; this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     e = fluid.layers.Uniform(0.0, 2.0).entropy()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[e])[0].round(4)
            array([0.6931], dtype=float32)
        """
        L = _L()
        return L.log(L.elementwise_sub(self.high, self.low))

    def log_prob(self, value: Variable) -> Variable:
        """-log(high - low) inside [low, high), -inf outside.

        Args:
            value (Variable): the points to score (broadcast against the parameters).
        Returns:
            Variable: the log density at ``value``, dtype of ``value``.
        Raises:
            TypeError: ``value`` is not a Variable.
            ValueError: ``value`` cannot be broadcast against the parameters (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     p = fluid.layers.Uniform(0.0, 2.0).log_prob(fluid.layers.assign(np.array([0.5], "float32")))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[p])[0].round(4)
            array([-0.6931], dtype=float32)
        """
        self._check_value(value, "Uniform.log_prob")
        L = _L()
        low, high = self._like(self.low, value), self._like(self.high, value)
        inside = L.elementwise_mul(L.cast(L.less_than(low, value), value.dtype),
                                   L.cast(L.less_than(value, high), value.dtype))
        return L.elementwise_sub(L.log(inside), L.log(L.elementwise_sub(high, low)))


class Normal(_LocScale):
    """Normal distribution: pdf = exp(-0.5 (x - loc)^2 / scale^2) / sqrt(2 pi scale^2).

    Args:
        loc (float | list | numpy.ndarray | Variable): the mean.
        scale (float | list | numpy.ndarray | Variable): the standard deviation.
    Returns:
        Normal: the distribution; ``sample``, ``entropy``, ``log_prob`` and ``kl_divergence``
        build its Variables.
    Raises:
        TypeError: a parameter is not a float, list, numpy.ndarray or Variable.
        ValueError: one parameter is a Variable and the other is not, or the parameters cannot
            be broadcast together.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     dist = fluid.layers.Normal(loc=0.0, scale=1.0)
        ...     x = fluid.layers.assign(np.array([0.0, 1.0], "float32"))
        ...     logp = dist.log_prob(x)
        ...     ent = dist.entropy()
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [a.round(4) for a in exe.run(main, fetch_list=[logp, ent])]
        [array([-0.9189, -1.4189], dtype=float32), array([1.4189], dtype=float32)]
    """

    def __init__(self, loc: Any, scale: Any) -> None:
        self.loc, self.scale = self._init_params(loc, scale)

    def sample(self, shape: Sequence[int], seed: int = 0) -> Variable:
        """Samples of shape ``shape + batch_shape`` (``batch_shape + shape`` when the batch
        dim is unknown, as fluid): loc + scale * N(0, 1).

        Args:
            shape (list of int): the sample shape, prepended to the batch shape.
            seed (int, default 0): a fixed seed; 0 draws from the program's random stream.
        Returns:
            Variable: the samples, ``shape + batch_shape`` (see above), dtype of the parameters.
        Raises:
            TypeError: ``shape`` is not a list of ints, or ``seed`` is not an int.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     samples = fluid.layers.Normal(loc=2.0, scale=0.5).sample([1000], seed=1)
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> s, = exe.run(main, fetch_list=[samples])
            >>> s.shape, round(float(s.mean()), 1), round(float(s.std()), 1)
            ((1000,), 2.0, 0.5)
        """
        L = _L()
        shape, seed = _sample_shape(shape, seed)
        z = self._noise(shape, seed, L.elementwise_add(self.loc, self.scale), uniform=False)
        ax = self._axis(z, self.scale)
        return self._finish(L.elementwise_add(L.elementwise_mul(z, self.scale, axis=ax),
                                              self.loc, axis=ax), shape)

    def _batch_zeros(self) -> Variable:
        L = _L()
        return L.scale(L.elementwise_add(self.loc, self.scale), scale=0.0)

    def entropy(self) -> Variable:
        """0.5 + 0.5 log(2 pi) + log(scale), in the batch shape of loc and scale.

        Args:
            None: this method takes no arguments.
        Returns:
            Variable: the entropy, in the batch shape of ``loc`` and ``scale``.
        Raises:
            None: the parameters were checked by the constructor; this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     ent = fluid.layers.Normal(0.0, 1.0).entropy()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[ent])[0].round(4)          # 0.5 log(2 pi e)
            array([1.4189], dtype=float32)
        """
        L = _L()
        h = L.scale(L.log(self.scale), bias=0.5 + 0.5 * _LOG_2PI)
        return L.elementwise_add(self._batch_zeros(), h)

    def log_prob(self, value: Variable) -> Variable:
        """-(value - loc)^2 / (2 scale^2) - log(scale) - log(sqrt(2 pi)).

        Args:
            value (Variable): the points to score (broadcast against the parameters).
        Returns:
            Variable: the log density at ``value``, dtype of ``value``.
        Raises:
            TypeError: ``value`` is not a Variable.
            ValueError: ``value`` cannot be broadcast against the parameters (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     logp = fluid.layers.Normal(0.0, 1.0).log_prob(fluid.layers.assign(np.array([0.0], "float32")))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[logp])[0].round(4)          # -log(sqrt(2 pi))
            array([-0.9189], dtype=float32)
        """
        self._check_value(value, "Normal.log_prob")
        L = _L()
        loc, scale = self._like(self.loc, value), self._like(self.scale, value)
        z = L.elementwise_div(L.elementwise_sub(value, loc), scale)
        return L.elementwise_sub(L.scale(L.square(z), scale=-0.5, bias=-0.5 * _LOG_2PI),
                                 L.log(scale))

    def kl_divergence(self, other: "Normal") -> Variable:
        """KL(self || other) = 0.5 (r + ((loc - loc') / scale')^2 - 1 - log r),
        r = (scale / scale')^2.

        Args:
            other (Normal): the second distribution.
        Returns:
            Variable: KL(self || other), in the broadcast batch shape of both.
        Raises:
            TypeError: ``other`` is not a Normal.
            ValueError: the two batch shapes cannot be broadcast (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     kl = fluid.layers.Normal(0.0, 1.0).kl_divergence(fluid.layers.Normal(1.0, 1.0))
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[kl])[0].round(4)
            array([0.5], dtype=float32)
        """
        if not isinstance(other, Normal):
            raise TypeError(f"Normal.kl_divergence: other must be a Normal, but received "
                            f"{type(other).__name__}")
        L = _L()
        ratio = L.square(L.elementwise_div(self.scale, other.scale))
        t1 = L.square(L.elementwise_div(L.elementwise_sub(self.loc, other.loc), other.scale))
        inner = L.elementwise_sub(L.elementwise_add(ratio, t1), L.log(ratio))
        return L.scale(inner, scale=0.5, bias=-0.5)


class Categorical(Distribution):
    """Categorical distribution over the last dim of ``logits`` (probabilities
    softmax(logits)).

    Args:
        logits (Variable): unnormalized log-probabilities ``[..., K]``.
    Returns:
        Categorical: the distribution; ``entropy`` and ``kl_divergence`` build its Variables.
    Raises:
        TypeError: ``logits`` is not a float, list, numpy.ndarray or Variable.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     logits = fluid.layers.assign(np.log(np.array([[0.5, 0.5]], "float32")))
        ...     other = fluid.layers.assign(np.log(np.array([[0.9, 0.1]], "float32")))
        ...     cat = fluid.layers.Categorical(logits)
        ...     ent = cat.entropy()
        ...     kl = cat.kl_divergence(fluid.layers.Categorical(other))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [a.round(4) for a in exe.run(main, fetch_list=[ent, kl])]
        [array([[0.6931]], dtype=float32), array([[0.5108]], dtype=float32)]
    """

    def __init__(self, logits: Any) -> None:
        if self._validate_args(logits):
            self.logits = logits
        else:
            self.logits = self._to_variable(logits)[0]

    def _log_probs(self) -> Tuple[Variable, Variable]:
        """(log-probabilities, probabilities) over the last dim, computed stably."""
        L = _L()
        shifted = L.elementwise_sub(self.logits,
                                    L.reduce_max(self.logits, dim=-1, keep_dim=True))
        e = L.exp(shifted)
        z = L.reduce_sum(e, dim=-1, keep_dim=True)
        return L.elementwise_sub(shifted, L.log(z)), L.elementwise_div(e, z)

    def entropy(self) -> Variable:
        """-sum(p log p) over the last dim (kept as size 1)."""
        L = _L()
        logp, p = self._log_probs()
        return L.scale(L.reduce_sum(L.elementwise_mul(p, logp), dim=-1, keep_dim=True),
                       scale=-1.0)

    def kl_divergence(self, other: "Categorical") -> Variable:
        """sum(p (log p - log q)) over the last dim (kept as size 1)."""
        if not isinstance(other, Categorical):
            raise TypeError(f"Categorical.kl_divergence: other must be a Categorical, but "
                            f"received {type(other).__name__}")
        L = _L()
        logp, p = self._log_probs()
        logq, _ = other._log_probs()
        return L.reduce_sum(L.elementwise_mul(p, L.elementwise_sub(logp, logq)), dim=-1,
                            keep_dim=True)


class MultivariateNormalDiag(Distribution):
    """Multivariate normal with mean ``loc`` [k] and diagonal covariance matrix ``scale``
    [k, k] (off-diagonal entries are ignored).

    Args:
        loc (Variable): the mean ``[K]``.
        scale (Variable): the diagonal covariance matrix ``[K, K]``.
    Returns:
        MultivariateNormalDiag: the distribution; ``entropy`` and ``kl_divergence`` build its
        Variables.
    Raises:
        ValueError: one parameter is a Variable and the other is not, a non-Variable parameter
            cannot be converted to a float32 array, ``scale`` is not a square [k, k] matrix with
            k known, or ``loc`` is not [k].

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loc = fluid.layers.assign(np.array([0.0, 0.0], "float32"))
        ...     scale = fluid.layers.assign(np.diag(np.array([1.0, 2.0], "float32")))
        ...     d = fluid.layers.MultivariateNormalDiag(loc, scale)
        ...     ent = d.entropy()
        ...     kl = d.kl_divergence(fluid.layers.MultivariateNormalDiag(loc, scale))
        >>> exe = fluid.Executor(fluid.CPUPlace())
        >>> [a.round(4) for a in exe.run(main, fetch_list=[ent, kl])]
        [array([3.1845], dtype=float32), array([0.], dtype=float32)]
    """

    def __init__(self, loc: Any, scale: Any) -> None:
        if self._validate_args(loc, scale):
            self.loc, self.scale = loc, scale
        else:
            loc_np = np.asarray(loc, dtype=np.float32)
            scale_np = np.asarray(scale, dtype=np.float32)
            self.loc, self.scale = _L().assign(loc_np), _L().assign(scale_np)
        k = list(self.scale.shape)
        if len(k) != 2 or k[0] != k[1] or k[0] <= 0:
            raise ValueError(f"MultivariateNormalDiag: scale must be a square [k, k] matrix "
                             f"with k known, but its shape is {k}")
        if list(self.loc.shape) not in ([k[0]], [-1]):
            raise ValueError(f"MultivariateNormalDiag: loc must have shape [{k[0]}] to match "
                             f"scale {k}, but its shape is {list(self.loc.shape)}")

    def _diag(self, scale: Variable) -> Variable:
        """The diagonal of ``scale`` ([k])."""
        L = _L()
        eye = L.assign(np.eye(scale.shape[0], dtype=np.float32))
        eye = eye if scale.dtype == eye.dtype else L.cast(eye, scale.dtype)
        return L.reduce_sum(L.elementwise_mul(scale, eye), dim=1)

    def entropy(self) -> Variable:
        """0.5 (k (1 + log 2 pi) + log det(scale)), shape [1].

        Args:
            None: this method takes no arguments.
        Returns:
            Variable: [1], the entropy.
        Raises:
            None: the parameters were checked by the constructor; this method does not raise.

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     d = fluid.layers.MultivariateNormalDiag(
            ...         fluid.layers.assign(np.zeros(2, "float32")),
            ...         fluid.layers.assign(np.diag(np.array([1.0, 1.0], "float32"))))
            ...     # log(2 pi e) for two unit dims
            ...     ent = d.entropy()
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[ent])[0].round(4)
            array([2.8379], dtype=float32)
        """
        L = _L()
        k = self.scale.shape[0]
        log_det = L.reduce_sum(L.log(self._diag(self.scale)))
        return L.scale(log_det, scale=0.5, bias=0.5 * k * (1.0 + _LOG_2PI))

    def kl_divergence(self, other: "MultivariateNormalDiag") -> Variable:
        """KL(self || other) = 0.5 (tr(S'^-1 S) + (m' - m)^T S'^-1 (m' - m) - k
        + log det S' - log det S), shape [1].

        Args:
            other (MultivariateNormalDiag): the second distribution (same k).
        Returns:
            Variable: [1], KL(self || other).
        Raises:
            TypeError: ``other`` is not a MultivariateNormalDiag.
            ValueError: the two distributions have different k (shape inference).

        Example:
            >>> import numpy as np
            >>> import fluidlite as fluid
            >>> main, startup = fluid.Program(), fluid.Program()
            >>> with fluid.program_guard(main, startup):
            ...     p = fluid.layers.MultivariateNormalDiag(fluid.layers.assign(np.zeros(2, "float32")),
            ...                                             fluid.layers.assign(np.eye(2, dtype="float32")))
            ...     q = fluid.layers.MultivariateNormalDiag(fluid.layers.assign(np.ones(2, "float32")),
            ...                                             fluid.layers.assign(np.eye(2, dtype="float32")))
            ...     kl = p.kl_divergence(q)                             # |mu_p - mu_q|^2 / 2
            >>> exe = fluid.Executor(fluid.CPUPlace())
            >>> exe.run(main, fetch_list=[kl])[0].round(4)
            array([1.], dtype=float32)
        """
        if not isinstance(other, MultivariateNormalDiag):
            raise TypeError(f"MultivariateNormalDiag.kl_divergence: other must be a "
                            f"MultivariateNormalDiag, but received {type(other).__name__}")
        L = _L()
        d, d2 = self._diag(self.scale), self._diag(other.scale)
        trace = L.reduce_sum(L.elementwise_div(d, d2))
        diff = L.elementwise_sub(other.loc, self.loc)
        maha = L.reduce_sum(L.elementwise_div(L.square(diff), d2))
        log_det = L.elementwise_sub(L.reduce_sum(L.log(d2)), L.reduce_sum(L.log(d)))
        total = L.elementwise_add(L.elementwise_add(trace, maha), log_det)
        return L.scale(total, scale=0.5, bias=-0.5 * self.scale.shape[0])


def _make_atomic(cls: type) -> None:
    """Every public method (and the constructor, which may build constants) is atomic like
    the layer functions: a call that raises leaves the programs as they were."""
    from ..core.atomic import atomic_layer
    for name in ("__init__", "sample", "entropy", "log_prob", "kl_divergence"):
        if name in vars(cls):
            setattr(cls, name, atomic_layer(vars(cls)[name]))
    cls.__fluidlite_atomic__ = True      # type: ignore[attr-defined]


for _cls in (Distribution, _LocScale, Uniform, Normal, Categorical, MultivariateNormalDiag):
    _make_atomic(_cls)
