"""Tests written from mutation testing (issue 28, docs/mutation.md) for ``fluidlite/ops/manip.py``:
shape inference of concat, split, stack, reshape2, squeeze2, unsqueeze2, flatten2 and
transpose2 checked against the shapes their NumPy kernels actually produce (a property over
many shapes), the unknown-dim (-1) rules fluid's InferShape applies, and the error messages."""
import itertools

import numpy as np
import pytest

from fluidlite.core.registry import VarSpec, get_op_def

OP = get_op_def


def _spec(shape, dtype="float32", lod_level=0):
    return VarSpec(tuple(shape), dtype, lod_level)


def _arr(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


SHAPES = [(2, 3), (4, 1, 3), (2, 3, 4), (1, 5, 2, 3)]


@pytest.mark.parametrize("shape", SHAPES)
def test_concat_infer_matches_the_kernel_on_every_axis(shape):
    for axis in range(-len(shape), len(shape)):
        other = list(shape)
        other[axis] += 2
        xs = [_arr(shape), _arr(other, 1), _arr(shape, 2)]
        got = OP("concat").infer([_spec(x.shape, lod_level=1) for x in xs], axis=axis)["Out"]
        out = OP("concat").forward(xs, axis=axis)["Out"]
        assert tuple(got.shape) == out.shape and got.lod_level == 1
        np.testing.assert_array_equal(out, np.concatenate(xs, axis=axis))


def test_concat_unknown_dims():
    c = OP("concat")
    assert c.infer([_spec((-1, 3)), _spec((4, 3))], axis=0)["Out"].shape == (-1, 3)
    assert c.infer([_spec((-1, 3)), _spec((4, 2))], axis=1)["Out"].shape == (4, 5)
    assert c.infer([_spec((-1, 3)), _spec((-1, 2))], axis=1)["Out"].shape == (-1, 5)
    assert c.infer([_spec((2, 3))], np.array([1]), axis=0)["Out"].shape == (-1, -1)


def test_concat_errors_name_the_inputs():
    c = OP("concat")
    with pytest.raises(ValueError, match=r"concat: input shapes must match except on axis 0: "
                                         r"X\[0\] has shape \[2, 3\] but X\[1\] has shape "
                                         r"\[2, 4\]"):
        c.infer([_spec((2, 3)), _spec((2, 4))], axis=0)
    with pytest.raises(ValueError, match=r"X\[0\] has shape \[2, 3\] but X\[1\] has shape "
                                         r"\[2, 3, 1\]"):
        c.infer([_spec((2, 3)), _spec((2, 3, 1))], axis=1)
    with pytest.raises(ValueError, match=r"concat: all inputs must have the same dtype, but X\[0\] "
                                         r"is float32 and X\[1\] is int64"):
        c.infer([_spec((2, 3)), _spec((2, 3), "int64")], axis=0)
    with pytest.raises(ValueError, match="concat: X is empty"):
        c.infer([], axis=0)


@pytest.mark.parametrize("shape,axis,num,sections", [
    ((6, 4), 0, 3, ()), ((6, 4), 1, 2, ()), ((2, 9, 3), -2, 0, (2, -1, 3)),
    ((2, 9, 3), 1, 0, (4, 5)), ((5, 4), 0, 0, (-1, 1)), ((5, 4), 1, 4, ())])
def test_split_infer_matches_the_kernel(shape, axis, num, sections):
    x = _arr(shape)
    outs = OP("split").infer(_spec(shape, lod_level=1), axis=axis, num=num,
                             sections=list(sections))["Out"]
    got = OP("split").forward(x, axis=axis, num=num, sections=list(sections))["Out"]
    assert [tuple(o.shape) for o in outs] == [g.shape for g in got]
    assert all(o.lod_level == 1 for o in outs)
    np.testing.assert_array_equal(np.concatenate(got, axis=axis), x)


def test_split_unknown_dims_and_errors():
    s = OP("split")
    assert [o.shape for o in s.infer(_spec((-1, 4)), axis=0, num=2)["Out"]] == [(-1, 4)] * 2
    assert [o.shape for o in s.infer(_spec((-1, 4)), axis=0, num=0, sections=[1, -1])["Out"]] \
        == [(1, 4), (-1, 4)]
    with pytest.raises(ValueError, match=r"split: the dim of size 5 cannot be split into 2 equal"):
        s.infer(_spec((5, 4)), axis=0, num=2)
    with pytest.raises(ValueError, match=r"split: give num > 0 or a non-empty sections list"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[])
    with pytest.raises(ValueError, match=r"split: only one entry of sections \[-1, -1\] can be -1"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[-1, -1])
    with pytest.raises(ValueError, match=r"split: sections \[4, 3, -1\] exceed the dim size 5"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[4, 3, -1])
    with pytest.raises(ValueError, match=r"split: sections \[2, 2\] sum to 4, but the dim"):
        s.infer(_spec((5, 4)), axis=0, num=0, sections=[2, 2])


@pytest.mark.parametrize("shape", SHAPES)
def test_stack_infer_matches_the_kernel(shape):
    for axis in range(-len(shape) - 1, len(shape) + 1):
        xs = [_arr(shape, k) for k in range(3)]
        got = OP("stack").infer([_spec(shape, lod_level=0)] * 3, axis=axis)
        out = OP("stack").forward(xs, axis=axis)
        key = next(iter(out))
        assert tuple(got[key].shape) == out[key].shape == np.stack(xs, axis=axis).shape


@pytest.mark.parametrize("shape,target", [
    ((2, 3, 4), (6, 4)), ((2, 3, 4), (0, -1)), ((2, 3, 4), (-1,)), ((2, 3, 4), (4, 0, 2)),
    ((2, 3, 4), (1, 24)), ((6,), (2, -1, 1))])
def test_reshape2_infer_matches_the_kernel(shape, target):
    x = _arr(shape)
    got = OP("reshape2").infer(_spec(shape), None, None, shape=list(target))
    out = OP("reshape2").forward(x, None, None, shape=list(target))
    assert tuple(got["Out"].shape) == out["Out"].shape
    assert tuple(got["XShape"].shape) == (0,) + shape
    np.testing.assert_array_equal(out["Out"].ravel(), x.ravel())


def test_reshape2_unknown_dims_and_errors():
    r = OP("reshape2")
    assert r.infer(_spec((-1, 3, 4)), None, None, shape=[-1, 12])["Out"].shape == (-1, 12)
    assert r.infer(_spec((-1, 3, 4)), None, None, shape=[0, -1])["Out"].shape == (-1, 12)
    assert r.infer(_spec((5, -1)), None, None, shape=[0, 2, -1])["Out"].shape == (5, 2, -1)
    for target, msg in [([-1, -1], r"only one dimension of the target shape \[-1, -1\] can be -1"),
                        ([0, 0, 0, 0], r"copies dim 3 \(0\) but X has only 3 dims"),
                        ([2, -2], r"has an invalid dim -2"),
                        ([5, -1], r"24 elements are not divisible by 5"),
                        ([5, 5], r"\(24 elements\) to \[5, 5\] \(25 elements\)")]:
        with pytest.raises(ValueError, match="reshape2: .*" + msg):
            r.infer(_spec((2, 3, 4)), None, None, shape=target)


@pytest.mark.parametrize("shape,axes", [((1, 3, 1, 4), [0, 2]), ((1, 3, 1, 4), []),
                                        ((2, 1, 3), [-2]), ((2, 3), [])])
def test_squeeze2_infer_matches_the_kernel(shape, axes):
    got = OP("squeeze2").infer(_spec(shape), axes=axes)
    out = OP("squeeze2").forward(_arr(shape), axes=axes)
    assert tuple(got["Out"].shape) == out["Out"].shape


@pytest.mark.parametrize("shape,axes", [((3, 4), [0]), ((3, 4), [0, 3]), ((3, 4), [-1]),
                                        ((3,), [0, 1, 2]), ((2, 3), [1, 1])])
def test_unsqueeze2_infer_matches_the_kernel(shape, axes):
    got = OP("unsqueeze2").infer(_spec(shape), None, None, axes=axes)
    out = OP("unsqueeze2").forward(_arr(shape), None, None, axes=axes)
    assert tuple(got["Out"].shape) == out["Out"].shape
    assert out["Out"].size == int(np.prod(shape))


@pytest.mark.parametrize("shape,axis", [((2, 3, 4), 0), ((2, 3, 4), 1), ((2, 3, 4), 3),
                                        ((5,), 1), ((-1, 3, 4), 1), ((2, -1, 4), 2)])
def test_flatten2_infer(shape, axis):
    got = OP("flatten2").infer(_spec(shape), axis=axis)["Out"].shape
    left, right = shape[:axis], shape[axis:]
    num = lambda dims: -1 if any(d < 0 for d in dims) else int(np.prod(dims, dtype=np.int64))
    assert tuple(got) == (num(left), num(right))
    if -1 not in shape:
        assert OP("flatten2").forward(_arr(shape), axis=axis)["Out"].shape == tuple(got)


@pytest.mark.parametrize("perm", list(itertools.permutations(range(3))))
def test_transpose2_infer_matches_the_kernel(perm):
    shape = (2, 3, 4)
    got = OP("transpose2").infer(_spec(shape), axis=list(perm))
    out = OP("transpose2").forward(_arr(shape), axis=list(perm))
    assert tuple(got["Out"].shape) == out["Out"].shape == tuple(shape[p] for p in perm)
