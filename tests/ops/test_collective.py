"""OpTest cases for fluidlite/ops/collective.py in one process (every collective is the
identity outside an MPI launch). Their multi-rank results are checked by the 2-rank job of
tests/test_distributed.py (``check_collectives``)."""
import numpy as np
import pytest

from fluidlite.core.registry import get_op_def
from fluidlite.testing import OpTest

X = OpTest.rand(4, 3)


def run_op(op_type, inputs, attrs, outputs, grad=()):
    t = OpTest()
    t.op_type, t.inputs, t.attrs, t.outputs = op_type, inputs, attrs, outputs
    t.check_infer()
    t.check_output()
    if grad:
        t.check_grad(list(grad), next(iter(outputs)))
    return t


def test_allreduce_sum_is_identity_alone_and_differentiable():
    run_op("c_allreduce_sum", {"X": X}, {"ring_id": 0}, {"Out": X}, grad=["X"])


@pytest.mark.parametrize("op", ["c_allreduce_max", "c_allreduce_min", "c_allreduce_prod"])
def test_other_allreduces_are_identity_alone_and_not_differentiable(op):
    run_op(op, {"X": X}, {"ring_id": 0}, {"Out": X})
    assert get_op_def(op).no_grad


def test_broadcast_allgather_reducescatter_alone():
    run_op("c_broadcast", {"X": X}, {"ring_id": 0, "root": 0}, {"Out": X})
    run_op("c_allgather", {"X": X}, {"nranks": 1}, {"Out": X})
    run_op("c_reducescatter", {"X": X}, {"nranks": 1}, {"Out": X})


def test_shape_inference_scales_the_first_dim_by_nranks():
    from fluidlite.core.registry import VarSpec
    spec = VarSpec((4, 3), "float32")
    assert get_op_def("c_allgather").run_infer([spec], {"nranks": 2})["Out"].shape == (8, 3)
    assert get_op_def("c_reducescatter").run_infer([spec], {"nranks": 2})["Out"].shape == (2, 3)
    with pytest.raises(ValueError, match="divisible by nranks=3"):
        get_op_def("c_reducescatter").run_infer([spec], {"nranks": 3})


def test_broadcast_root_outside_the_ring_raises():
    from fluidlite.distributed.comm import Communicator

    class _Fake:                       # a 2-rank communicator whose collectives never run
        def Get_rank(self): return 0
        def Get_size(self): return 2
    with pytest.raises(ValueError, match="root 2 is not a rank of ring 0"):
        Communicator(0, _Fake()).broadcast(X, root=2)


def test_syncs_pass_through_and_setup_ops_run():
    run_op("c_sync_calc_stream", {"X": X}, {}, {"Out": X})
    Y = OpTest.rand(2, seed=3)
    run_op("c_sync_comm_stream", {"X": [("a", X), ("b", Y)]}, {"ring_id": 0},
           {"Out": [("a_out", X), ("b_out", Y)]})
    run_op("c_gen_nccl_id", {}, {"rank": 0}, {"Out": np.array([0], np.int64)})
    # c_comm_init creates ring 3 (the identity in one process); a wrong nranks is refused
    get_op_def("c_comm_init").forward(None, nranks=1, rank=0, ring_id=3)
    from fluidlite.distributed import comm
    assert comm.get(3).size == 1 and comm.get(3).ring_id == 3
    with pytest.raises(ValueError, match="declares nranks=2, but this launch has 1"):
        get_op_def("c_comm_init").forward(None, nranks=2, rank=0, ring_id=4)
