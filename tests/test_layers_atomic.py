"""Every layer function is atomic: a failing call leaves the main and startup programs exactly as
before (version, printed form, name counters), wherever it fails; and a later call builds
exactly what it would have built had the failure never happened."""
import numpy as np
import pytest

import fluidlite as fluid
from fluidlite.core import ir, names
from fluidlite.core.atomic import atomic_layer

L = fluid.layers


def snapshot():
    main, startup = fluid.default_main_program(), fluid.default_startup_program()
    return (main.version, str(main), main.to_string(with_details=True), startup.version,
            str(startup), startup.to_string(with_details=True), dict(names.generator.ids),
            main.current_block_idx, main.random_seed)


class Env:
    """The variables the cases build on (in the default programs)."""

    def __init__(self):
        self.x = fluid.data("x", [-1, 4], "float32")
        self.x3 = fluid.data("x3", [-1, 3], "float32")
        self.seq = fluid.data("seq", [-1, 5, 4], "float32")
        self.img = fluid.data("img", [-1, 3, 8, 8], "float32")
        self.ids = fluid.data("ids", [-1, 1], "int64")
        self.label = fluid.data("label", [-1, 1], "int64")
        self.z = fluid.data("z", [-1, 5], "int64")
        self.z4 = fluid.data("z4", [-1, 4], "int64")
        self.ragged = fluid.data("ragged", [-1, -1], "float32")
        self.h = L.fc(self.x, 4, act="relu")        # fc_0.w_0: [4, 4]


@pytest.fixture
def env():
    return Env()


# -- natural failures: (id, call, exception, message pattern) -------------------------------
CASES = [
    ("fc-bad-act", lambda e: L.fc(e.x, 3, act="nope"), ValueError,
     r"fc: act='nope' is not an activation .*expected None, an activation name"),
    ("fc-act-not-str", lambda e: L.fc(e.x, 3, act=3), TypeError, r"fc: act must be None"),
    ("fc-act-dict-without-type", lambda e: L.fc(e.x, 3, act={"alpha": 1}), TypeError,
     r"must have a 'type' entry"),
    ("fc-bad-param-attr", lambda e: L.fc(e.x, 3, param_attr=123), TypeError,
     r"fc: param_attr must be a ParamAttr, a parameter name \(str\).* but received 123 of "
     r"type int"),
    ("fc-bad-bias-attr-class", lambda e: L.fc(e.x, 3, bias_attr=fluid.initializer.Constant),
     TypeError, r"bias_attr must be an instance such as ConstantInitializer\(\)"),
    ("fc-bad-size", lambda e: L.fc(e.x, 0), ValueError, r"fc: size must be >= 1, but received 0"),
    ("fc-float-size", lambda e: L.fc(e.x, 2.5), TypeError, r"fc: size must be an int"),
    ("fc-bad-name", lambda e: L.fc(e.x, 3, name=7), TypeError, r"fc: name must be a non-empty str"),
    ("fc-second-input-unknown-dim", lambda e: L.fc([e.x, e.ragged], 3), ValueError,
     r"fc: input 'ragged' has an unknown dim"),
    ("fc-second-param-shared-clash",
     lambda e: L.fc([e.x, e.x], 3, param_attr=[None, "fc_0.w_0"]), ValueError,
     r"Parameter 'fc_0.w_0' is shared but declared with shape \[4, 3\] here and \[4, 4\]"),
    ("fc-act-shape-error-in-last-op", lambda e: L.fc(e.x, 3, act={"type": "softmax", "axis": 7}),
     ValueError, r"softmax"),
    ("conv2d-bad-act", lambda e: L.conv2d(e.img, 4, 3, act="nope"), ValueError,
     r"conv2d: act='nope' is not an activation"),
    ("conv2d-groups", lambda e: L.conv2d(e.img, 4, 3, groups=2), ValueError,
     r"must be divisible by groups"),
    ("conv2d-act-fails-after-conv-and-bias",
     lambda e: L.conv2d(e.img, 4, 3, act={"type": "softmax", "axis": 9}), ValueError,
     r"softmax"),
    ("conv2d-shared-param-clash", lambda e: L.conv2d(e.img, 4, 3, param_attr="fc_0.w_0"),
     ValueError, r"is shared but declared with shape"),
    ("conv2d-transpose-bad-act", lambda e: L.conv2d_transpose(e.img, 4, filter_size=3,
                                                              act="nope"),
     ValueError, r"conv2d_transpose: act='nope'"),
    ("pool2d-bad-type", lambda e: L.pool2d(e.img, 2, pool_type="median"), ValueError,
     r"pool2d: unknown pool_type 'median'"),
    ("batch-norm-bad-act", lambda e: L.batch_norm(e.img, act="nope"), ValueError,
     r"batch_norm: act='nope'"),
    ("batch-norm-moving-mean-clash", lambda e: L.batch_norm(e.img, moving_mean_name="fc_0.w_0"),
     ValueError, r"Parameter 'fc_0.w_0' is shared"),
    ("batch-norm-bad-momentum", lambda e: L.batch_norm(e.img, momentum=1.5), ValueError,
     r"batch_norm: momentum must be in \[0, 1\], but received 1.5"),
    ("layer-norm-bad-axis", lambda e: L.layer_norm(e.x, begin_norm_axis=3), ValueError,
     r"layer_norm: begin_norm_axis must be in \[1, 1\]"),
    ("layer-norm-bias-clash", lambda e: L.layer_norm(e.x, bias_attr="fc_0.w_0"), ValueError,
     r"is shared"),
    ("embedding-param-clash", lambda e: L.embedding(e.ids, [10, 4], param_attr="fc_0.w_0"),
     ValueError, r"is shared but declared with shape \[10, 4\]"),
    ("embedding-float-ids", lambda e: L.embedding(e.x, [10, 4]), TypeError,
     r"embedding: input 'x' must hold int64 ids"),
    ("dropout-prob", lambda e: L.dropout(e.x, 1.5), ValueError,
     r"dropout: dropout_prob must be a float in \[0, 1\]"),
    ("elementwise-shape", lambda e: L.elementwise_add(e.x, e.x3, act="relu"), ValueError,
     r"elementwise_add"),
    ("scale-bad-act", lambda e: L.scale(e.x, 2.0, act="nope"), ValueError,
     r"scale: act='nope'"),
    ("reduce-dim-in-list", lambda e: L.reduce_sum(e.x, dim=[0, 5]), ValueError,
     r"reduce_sum: dim 5 is out of range"),
    ("concat-shapes", lambda e: L.concat([e.x, e.img], axis=1), ValueError, r"concat"),
    ("reshape-bad-act", lambda e: L.reshape(e.x, [0, 2, 2], act="nope"), ValueError,
     r"reshape2: act='nope'"),
    ("softmax-ce-label-shape",
     lambda e: L.softmax_with_cross_entropy(e.x, e.z), ValueError, r"softmax_with_cross_entropy"),
    ("accuracy-label", lambda e: L.accuracy(e.x, e.z, k=2), ValueError, r"accuracy"),
    ("math-cast-then-shape-error", lambda e: e.x + e.z, ValueError, r"elementwise_add"),
    ("math-bad-operand", lambda e: e.x * "a", TypeError, r"unsupported operand for \*"),
    ("getitem-out-of-bounds", lambda e: e.x[:, 7], IndexError, r"index 7 is out of bounds"),
    ("astype-bad", lambda e: e.x.astype("nope"), TypeError, r"astype: 'nope' is not a data type"),
    ("lr-piecewise-values", lambda e: L.piecewise_decay([1, 2], [0.1, "a", 0.3]), TypeError,
     r"piecewise_decay: values\[1\] must be a number"),
    ("lr-decay-steps", lambda e: L.exponential_decay(0.1, 0, 0.5), ValueError,
     r"exponential_decay: decay_steps must be > 0"),
    ("nets-conv-pool-fails-in-pool",
     lambda e: fluid.nets.simple_img_conv_pool(e.img, 4, 3, pool_size=2, pool_stride=1,
                                               pool_type="median"),
     ValueError, r"pool2d: unknown pool_type"),
    ("nets-vgg-fails-in-dropout",
     lambda e: fluid.nets.img_conv_group(e.img, [4, 4], pool_size=2,
                                         conv_with_batchnorm=[False, True],
                                         conv_batchnorm_drop_rate=[0.0, 7.0]),
     ValueError, r"dropout: dropout_prob must be a float in \[0, 1\]"),
    ("nets-glu-odd", lambda e: fluid.nets.glu(e.x3), ValueError, r"split"),
    ("nets-attention-heads",
     lambda e: fluid.nets.scaled_dot_product_attention(e.seq, e.seq, e.seq, num_heads=3),
     ValueError, r"divisible by num_heads"),
]


@pytest.mark.parametrize("call,exc,pattern", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_failing_layer_call_changes_nothing(env, call, exc, pattern):
    before = snapshot()
    with pytest.raises(exc, match=pattern):
        call(env)
    assert snapshot() == before


def test_failed_call_does_not_shift_later_names(env):
    with pytest.raises(ValueError):
        L.fc(env.x, 3, param_attr=[None], act={"type": "softmax", "axis": 7})
    out = L.fc(env.x, 3)
    assert out.name == "fc_1.tmp_1"
    assert "fc_1.w_0" in fluid.default_startup_program().global_block().vars


# -- fault injection: fail after the k-th op of a successful call ---------------------------
class Injected(Exception):
    pass


def _inject(monkeypatch, k):
    """Make the k-th op appended/inserted (in any program) raise right after it was added."""
    count = [0]
    for method in ("append_op", "_insert_op"):
        real = getattr(ir.Block, method)

        def patched(self, *args, _real=real, **kwargs):
            op = _real(self, *args, **kwargs)
            count[0] += 1
            if count[0] == k:
                raise Injected(f"after op {k} ({op.type})")
            return op
        monkeypatch.setattr(ir.Block, method, patched)
    return count


# single layer calls; the compositions at the end are several calls, made one transaction by
# the user with @atomic_layer (arguments such as `L.fc(...)` run before the outer call)
BUILDS = [
    ("fc", lambda e: L.fc([e.x, e.h], 3, act="tanh")),
    ("conv2d", lambda e: L.conv2d(e.img, 4, 3, padding=1, act="relu")),
    ("conv2d_transpose", lambda e: L.conv2d_transpose(e.img, 2, filter_size=3, act="relu")),
    ("batch_norm", lambda e: L.batch_norm(e.img, act="relu")),
    ("layer_norm", lambda e: L.layer_norm(e.x, act="relu")),
    ("embedding", lambda e: L.embedding(e.ids, [10, 4])),
    ("accuracy", lambda e: L.accuracy(e.x, e.label, k=2)),
    ("piecewise_decay", lambda e: L.piecewise_decay([2, 5], [0.1, 0.05, 0.01])),
    ("linear_lr_warmup", lambda e: L.linear_lr_warmup(0.1, 3, 0.0, 0.1)),
    ("polynomial_decay", lambda e: L.polynomial_decay(0.1, 10, cycle=True)),
    ("math_cast", lambda e: e.x + e.z4),
    ("img_conv_group", lambda e: fluid.nets.img_conv_group(
        e.img, [4, 4], pool_size=2, conv_act="relu", conv_with_batchnorm=True,
        conv_batchnorm_drop_rate=0.5)),
    ("attention", lambda e: fluid.nets.scaled_dot_product_attention(e.seq, e.seq, e.seq,
                                                                     num_heads=2)),
    ("user_loss", atomic_layer(lambda e: L.mean(L.cross_entropy(L.softmax(L.fc(e.x, 3)),
                                                                e.label)))),
    ("user_lr", atomic_layer(lambda e: L.linear_lr_warmup(L.noam_decay(16, 4), 3, 0.0, 0.1))),
    ("user_shape_tensors", atomic_layer(lambda e: L.fill_constant(
        [L.fill_constant([1], "int32", 2), 3], "float32", 1.0))),
    ("user_math", atomic_layer(lambda e: (e.x + e.z[:, 0:4]) * 2.0 - e.h)),
]


def _op_count(build):
    """How many ops a successful call adds (counted in throw-away programs)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        e = Env()
        n0 = sum(len(p.global_block().ops) for p in (main, startup))
        build(e)
        return sum(len(b.ops) for p in (main, startup) for b in p.blocks) - n0


@pytest.mark.parametrize("build", [b[1] for b in BUILDS], ids=[b[0] for b in BUILDS])
def test_failure_after_any_op_of_a_layer_rolls_back_everything(env, build, monkeypatch):
    n_ops = _op_count(build)
    assert n_ops >= 1
    reference = None
    for k in range(1, n_ops + 1):
        before = snapshot()
        with monkeypatch.context() as m:
            count = _inject(m, k)
            with pytest.raises(Injected):
                build(env)
            assert count[0] == k
        assert snapshot() == before, f"op {k} of {n_ops}"
    # and the call then builds exactly what it builds in programs that never saw a failure
    build(env)
    reference_main, reference_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(reference_main, reference_startup), fluid.unique_name.guard():
        build(Env())
    assert str(fluid.default_main_program()) == str(reference_main)
    assert str(fluid.default_startup_program()) == str(reference_startup)
    del reference


# -- numpy scalars are accepted wherever Python numbers are --------------------------------
NUMPY_CALLS = [
    ("fc", lambda e: L.fc(e.x, np.int64(3), num_flatten_dims=np.int32(1)),
     lambda e: L.fc(e.x, 3, num_flatten_dims=1)),
    ("conv2d", lambda e: L.conv2d(e.img, np.int64(4), np.int64(3), stride=np.int32(1),
                                  padding=[np.int64(1), 1], groups=np.int64(1)),
     lambda e: L.conv2d(e.img, 4, 3, stride=1, padding=[1, 1], groups=1)),
    ("pool2d", lambda e: L.pool2d(e.img, np.int64(2), pool_stride=np.int64(2)),
     lambda e: L.pool2d(e.img, 2, pool_stride=2)),
    ("batch_norm", lambda e: L.batch_norm(e.img, momentum=np.float32(0.5),
                                          epsilon=np.float64(1e-3)),
     lambda e: L.batch_norm(e.img, momentum=0.5, epsilon=1e-3)),
    ("layer_norm", lambda e: L.layer_norm(e.seq, begin_norm_axis=np.int64(2),
                                          epsilon=np.float32(1e-5)),
     lambda e: L.layer_norm(e.seq, begin_norm_axis=2, epsilon=float(np.float32(1e-5)))),
    ("dropout", lambda e: L.dropout(e.x, np.float32(0.25), seed=np.int64(3)),
     lambda e: L.dropout(e.x, 0.25, seed=3)),
    ("embedding", lambda e: L.embedding(e.ids, [np.int64(10), np.int32(4)],
                                        padding_idx=np.int64(-1)),
     lambda e: L.embedding(e.ids, [10, 4], padding_idx=-1)),
    ("clip", lambda e: L.clip(e.x, np.float32(-1.0), np.float64(2.0)),
     lambda e: L.clip(e.x, -1.0, 2.0)),
    ("clip_by_norm", lambda e: L.clip_by_norm(e.x, np.float32(1.0)),
     lambda e: L.clip_by_norm(e.x, 1.0)),
    ("scale", lambda e: L.scale(e.x, np.float32(2.0), bias=np.int64(1)),
     lambda e: L.scale(e.x, 2.0, bias=1)),
    ("leaky_relu", lambda e: L.leaky_relu(e.x, np.float32(0.5)),
     lambda e: L.leaky_relu(e.x, 0.5)),
    ("softmax", lambda e: L.softmax(e.x, axis=np.int64(-1)), lambda e: L.softmax(e.x, axis=-1)),
    ("elementwise", lambda e: L.elementwise_add(e.x, e.h, axis=np.int64(0)),
     lambda e: L.elementwise_add(e.x, e.h, axis=0)),
    ("matmul", lambda e: L.matmul(e.x, e.h, transpose_y=True, alpha=np.float32(0.5)),
     lambda e: L.matmul(e.x, e.h, transpose_y=True, alpha=0.5)),
    ("mul", lambda e: L.mul(e.x, e.h, x_num_col_dims=np.int64(1)), lambda e: L.mul(e.x, e.h)),
    ("reduce", lambda e: L.reduce_sum(e.img, dim=[np.int64(1), np.int32(-1)]),
     lambda e: L.reduce_sum(e.img, dim=[1, -1])),
    ("reduce_scalar_dim", lambda e: L.reduce_mean(e.img, dim=np.int64(2)),
     lambda e: L.reduce_mean(e.img, dim=2)),
    ("topk", lambda e: L.topk(e.x, np.int64(2)), lambda e: L.topk(e.x, 2)),
    ("one_hot", lambda e: L.one_hot(e.ids, np.int64(5)), lambda e: L.one_hot(e.ids, 5)),
    ("accuracy", lambda e: L.accuracy(e.x, e.label, k=np.int64(2)),
     lambda e: L.accuracy(e.x, e.label, k=2)),
    ("cross_entropy", lambda e: L.cross_entropy(e.x, e.label, ignore_index=np.int64(-1)),
     lambda e: L.cross_entropy(e.x, e.label, ignore_index=-1)),
    ("concat", lambda e: L.concat([e.x, e.x3], axis=np.int64(1)),
     lambda e: L.concat([e.x, e.x3], axis=1)),
    ("split", lambda e: L.split(e.x, np.int64(2), dim=np.int64(1)),
     lambda e: L.split(e.x, 2, dim=1)),
    ("stack", lambda e: L.stack([e.x, e.h], axis=np.int64(1)),
     lambda e: L.stack([e.x, e.h], axis=1)),
    ("reshape", lambda e: L.reshape(e.img, [np.int64(-1), np.int32(64)]),
     lambda e: L.reshape(e.img, [-1, 64])),
    ("unsqueeze", lambda e: L.unsqueeze(e.x, np.int64(1)), lambda e: L.unsqueeze(e.x, 1)),
    ("flatten", lambda e: L.flatten(e.img, axis=np.int64(2)), lambda e: L.flatten(e.img, axis=2)),
    ("argmax", lambda e: L.argmax(e.x, axis=np.int64(1)), lambda e: L.argmax(e.x, axis=1)),
    ("fill_constant", lambda e: L.fill_constant([np.int64(2), 3], "float32", np.float32(1.5)),
     lambda e: L.fill_constant([2, 3], "float32", 1.5)),
    ("create_global_var", lambda e: L.create_global_var([np.int64(1)], np.float32(0.5),
                                                        "float32"),
     lambda e: L.create_global_var([1], 0.5, "float32")),
    ("assign_scalar", lambda e: L.assign(np.float32(2.5)), lambda e: L.assign(2.5)),
    ("uniform_random", lambda e: L.uniform_random([np.int64(2), 3], min=np.float32(-0.5),
                                                  max=np.float64(0.5), seed=np.int64(1)),
     lambda e: L.uniform_random([2, 3], min=-0.5, max=0.5, seed=1)),
    ("gaussian_random", lambda e: L.gaussian_random(np.int64(4), std=np.float32(2.0)),
     lambda e: L.gaussian_random([4], std=2.0)),
    ("batch_size_like", lambda e: L.fill_constant_batch_size_like(
        e.x, [-1, np.int64(2)], "float32", np.float32(3.0), input_dim_idx=np.int64(0)),
     lambda e: L.fill_constant_batch_size_like(e.x, [-1, 2], "float32", 3.0)),
    ("increment", lambda e: L.increment(L.fill_constant([1], "float32", 0.0), np.float32(2.0)),
     lambda e: L.increment(L.fill_constant([1], "float32", 0.0), 2.0)),
    ("lr", lambda e: L.exponential_decay(np.float32(0.5), np.int64(10), np.float64(0.9)),
     lambda e: L.exponential_decay(float(np.float32(0.5)), 10, 0.9)),
    ("param_attr_lr", lambda e: L.fc(e.x, 2, param_attr=fluid.ParamAttr(
        learning_rate=np.float32(0.5))),
     lambda e: L.fc(e.x, 2, param_attr=fluid.ParamAttr(learning_rate=0.5))),
    ("math", lambda e: e.x * np.float32(2.0) + np.int64(1), lambda e: e.x * 2.0 + 1),
]


@pytest.mark.parametrize("with_numpy,with_python", [c[1:] for c in NUMPY_CALLS],
                         ids=[c[0] for c in NUMPY_CALLS])
def test_numpy_scalars_build_the_same_program_as_python_numbers(with_numpy, with_python):
    programs = []
    for call in (with_numpy, with_python):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            call(Env())
        programs.append((str(main), str(startup)))
    assert programs[0] == programs[1]


@pytest.mark.parametrize("call,pattern", [
    (lambda e: L.fc(e.x, np.bool_(True)), r"fc: size must be an int .* received (np\.)?True"),
    (lambda e: L.fc(e.x, 3.0), r"fc: size must be an int \(a Python or numpy integer\), but "
                               r"received 3.0 of type float"),
    (lambda e: L.clip(e.x, "0", 1.0), r"clip: min must be a number .* received '0' of type str"),
    (lambda e: L.concat([e.x, e.x], axis=1.0), r"concat: axis must be an int"),
    (lambda e: L.reduce_sum(e.x, dim=[0, 1.5]), r"reduce_sum: dim\[1\] must be an int"),
    (lambda e: L.uniform_random([2, 3.5]), r"uniform_random: 'shape' must be a list of ints"),
    (lambda e: L.embedding(e.ids, [10.5, 4]), r"embedding: size must be \[vocab_size, emb_dim\]"),
    (lambda e: L.gaussian_random([2], std=-1.0), r"gaussian_random: 'std' must be >= 0"),
])
def test_non_numbers_and_bools_are_still_rejected_by_name(env, call, pattern):
    before = snapshot()
    with pytest.raises((TypeError, ValueError), match=pattern):
        call(env)
    assert snapshot() == before


def test_param_attr_learning_rate_range():
    with pytest.raises(ValueError, match=r"learning_rate must be >= 0 .* received -1"):
        fluid.ParamAttr(learning_rate=-1)
    with pytest.raises(TypeError, match="learning_rate must be a number, but received '1'"):
        fluid.ParamAttr(learning_rate="1")
    assert fluid.ParamAttr(learning_rate=np.float32(0.25)).learning_rate == 0.25


def test_every_public_layer_and_net_is_atomic():
    public = [getattr(L, n) for n in L.__all__
              if n not in ("generate_layer_fn", "generate_activation_fn")]
    assert len(public) > 100
    assert all(getattr(f, "__fluidlite_atomic__", False) for f in public)
    assert all(getattr(getattr(fluid.nets, n), "__fluidlite_atomic__", False)
               for n in fluid.nets.__all__)
    assert fluid.data.__fluidlite_atomic__ and fluid.embedding.__fluidlite_atomic__
    for method in ("__add__", "__rtruediv__", "__lt__", "__neg__", "__getitem__", "astype"):
        assert getattr(fluid.Variable, method).__fluidlite_atomic__
    relu = L.generate_activation_fn("relu")
    assert relu.__fluidlite_atomic__


def test_initializers_validate_and_take_numpy_scalars():
    init = fluid.initializer
    u = init.Uniform(np.float32(-1), np.int64(1), seed=np.int64(3))
    assert (u._low, u._high, u._seed) == (-1.0, 1.0, 3)
    assert init.Xavier(fan_in=np.int64(4), seed=np.int32(2))._fan_in == 4.0
    assert init.Constant(np.float32(0.5))._value == 0.5
    assert init.Normal(np.float32(1), np.float64(2))._std == 2.0
    for make, exc, pattern in [
            (lambda: init.Uniform(1, 0), ValueError,
             r"UniformInitializer: high \(0.0\) should be greater than or equal to low \(1.0\)"),
            (lambda: init.Normal(0, -1), ValueError, r"scale .* must be >= 0, but received -1"),
            (lambda: init.TruncatedNormal(0, "1"), TypeError,
             r"TruncatedNormalInitializer: scale must be a number"),
            (lambda: init.Xavier(seed=1.5), TypeError, r"XavierInitializer: seed must be an int"),
            (lambda: init.MSRA(fan_in=0), ValueError, r"MSRAInitializer: fan_in must be > 0"),
            (lambda: init.Constant("a"), TypeError, r"ConstantInitializer: value must be a number"),
            (lambda: init.Xavier(fan_out=True), TypeError, r"received True of type bool")]:
        with pytest.raises(exc, match=pattern):
            make()
    assert init.Constant(True)._value == 1.0          # fills bool variables, as in fluid
