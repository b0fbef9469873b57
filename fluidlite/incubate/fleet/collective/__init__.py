"""fluid 1.8's ``fluid.incubate.fleet.collective``: data-parallel training on MPI.

::

    from fluidlite.incubate.fleet.collective import fleet, DistributedStrategy
    from fluidlite.incubate.fleet.base import role_maker

    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy=DistributedStrategy())
    opt.minimize(loss)                       # backward, all-reduce pass, clip/decay/update
    exe.run(fleet.startup_program)           # initializers + broadcast from rank 0
    exe.run(fleet.main_program, feed=my_shard, fetch_list=[loss])

Run it with ``python -m fluidlite.distributed.launch --nproc_per_node 2 train.py`` (or
``mpirun -n 2 python train.py``); alone it trains in one process unchanged. Each rank feeds its
own shard and the loss is each rank's mean: the gradients are averaged over ranks, which equals
one process training on the whole batch when the shards have equal size.
"""
from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple

from ....core import rewrite
from ....core.ir import Program, Variable, default_startup_program
from ....distributed import comm as _comm
from ....distributed import data_parallel, local_sgd
from ..base import fleet_base as _fb
from ..base import role_maker as _rm

__all__ = ["fleet", "Fleet", "DistributedStrategy", "CollectiveOptimizer", "Collective"]


class DistributedStrategy:
    """fluid 1.8's collective ``DistributedStrategy``. Used here: ``nccl_comm_num`` (number of
    rings the gradients alternate between), ``fuse_all_reduce_ops`` (pack gradients smaller than
    1 MB into buckets of at most ``fuse_grad_size_in_MB`` for one all-reduce each; default on),
    ``overlap_allreduce`` (fluidlite's flag, default on: each bucket's all-reduce starts as
    soon as backward has produced its gradients and is waited for right before the clip /
    update; False: blocking all-reduces after the whole backward pass; same numbers either
    way), ``use_local_sgd`` with ``local_sgd_steps`` (k: parameters averaged every k steps,
    default 1) and ``local_sgd_is_warm_steps`` (averaging every step for the first steps,
    default 0), which ``local_sgd_config`` (a dict or an object with those names) may also
    give (``fluidlite.distributed.local_sgd``).
    ``exec_strategy`` / ``build_strategy`` / ``mode`` / ``collective_mode`` are accepted and
    have no effect on the CPU; turning on a feature fluidlite does not provide
    (``use_dist_fc``, ``forward_recompute``, ``use_amp``, ``use_hierarchical_allreduce``) makes
    ``minimize`` raise (docs/compatibility.md).

    Args:
        None: the constructor takes no arguments; set the attributes above afterwards (defaults:
            ``nccl_comm_num=1``, ``fuse_all_reduce_ops=True``, ``fuse_grad_size_in_MB=32``,
            ``overlap_allreduce=True``, ``use_local_sgd=False``, ``local_sgd_steps=1``,
            ``local_sgd_is_warm_steps=0``, the unprovided features False).
    Returns:
        DistributedStrategy: the settings for ``fleet.distributed_optimizer(opt, strategy)``.
    Raises:
        None: the constructor does not raise; ``CollectiveOptimizer.minimize`` raises ValueError
            for an unprovided feature turned on.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.collective import DistributedStrategy
        >>> strategy = DistributedStrategy()
        >>> strategy.nccl_comm_num = 2              # two all-reduce rings
        >>> strategy.fuse_all_reduce_ops = True
        >>> strategy.nccl_comm_num
        2
    """

    def __init__(self) -> None:
        self.fuse_all_reduce_ops = True
        self.fuse_grad_size_in_MB = 32
        self.overlap_allreduce = True
        self.use_local_sgd = False
        self.local_sgd_steps = 1
        self.local_sgd_is_warm_steps = 0
        self.local_sgd_config: Any = None
        self.use_dist_fc = False
        self.dist_fc_config = None
        self.mode = "nccl2"
        self.collective_mode = None
        self.nccl_comm_num = 1
        self.use_hierarchical_allreduce = False
        self.hierarchical_allreduce_inter_nranks = 1
        self.forward_recompute = False
        self.recompute_checkpoints: List[Any] = []
        self.use_amp = False
        self.amp_loss_scaling = 2 ** 15
        self.exec_strategy = None
        self.build_strategy = None


class Collective(_fb.Fleet):
    """The ``fleet`` singleton of collective mode."""

    def __init__(self) -> None:
        super().__init__(_fb.Mode.COLLECTIVE)
        self._role_maker: Optional[_rm.RoleMakerBase] = None
        self._optimizer: Optional["CollectiveOptimizer"] = None
        self.main_program: Optional[Program] = None
        self.startup_program: Optional[Program] = None
        self._origin_program: Optional[Program] = None

    # -- role --------------------------------------------------------------------------------
    def init(self, role_maker: Optional[_rm.RoleMakerBase] = None) -> None:
        """Take the role (default ``PaddleCloudRoleMaker(is_collective=True)``), checked against
        the MPI launch."""
        if role_maker is None:
            role_maker = _rm.PaddleCloudRoleMaker(is_collective=True)
        if not isinstance(role_maker, _rm.RoleMakerBase):
            raise TypeError(f"fleet.init: role_maker must be a RoleMakerBase (e.g. "
                            f"PaddleCloudRoleMaker(is_collective=True)), got {role_maker!r}")
        role_maker.generate_role()
        self._role_maker = role_maker
        _comm.world()             # joins the launch; installs the abort-on-failure hook

    def _role(self) -> _rm.RoleMakerBase:
        if self._role_maker is None:
            raise RuntimeError("fleet is not initialized: call fleet.init(role_maker) first")
        return self._role_maker

    def is_first_worker(self) -> bool:
        return self._role().is_first_worker()

    def worker_index(self) -> int:
        return self._role().worker_index()

    def worker_num(self) -> int:
        return self._role().worker_num()

    def is_worker(self) -> bool:
        return self._role().is_worker()

    def is_server(self) -> bool:
        return False

    def server_num(self) -> int:
        return 0

    def worker_endpoints(self, to_string: bool = False) -> Any:
        eps = self._role().get_trainer_endpoints()
        return ",".join(eps) if to_string else eps

    def barrier_worker(self) -> None:
        _comm.world().barrier()

    def init_worker(self) -> None:
        """Nothing to do in collective mode (kept for fluid scripts)."""

    def run_worker(self, main_programs: Any = None, scopes: Any = None) -> None:
        """Nothing to do in collective mode (kept for fluid scripts)."""

    def stop_worker(self) -> None:
        """Nothing to do in collective mode (kept for fluid scripts)."""

    def distributed_optimizer(self, optimizer: Any,
                              strategy: Optional[DistributedStrategy] = None
                              ) -> "CollectiveOptimizer":
        self._optimizer = CollectiveOptimizer(optimizer, strategy or DistributedStrategy())
        return self._optimizer

    # -- checkpoints: rank 0 writes, after a barrier -----------------------------------------
    def save_persistables(self, executor: Any, dirname: str,
                          main_program: Optional[Program] = None,
                          filename: Optional[str] = None) -> None:
        """Every rank waits until all reached this point; rank 0 writes the persistables
        (``fluid.io.save_persistables``: an all-or-nothing publish); all ranks return after the
        write. Ranks hold identical persistables, so the checkpoint loads in one process."""
        from .... import io
        self._rank0_writes(lambda: io.save_persistables(
            executor, dirname, main_program or self.main_program, filename))

    def save_inference_model(self, executor: Any, dirname: str,
                             feeded_var_names: Any = None, target_vars: Any = None,
                             main_program: Optional[Program] = None,
                             export_for_deployment: bool = True) -> None:
        """Rank 0 writes ``fluid.io.save_inference_model`` (pruned: no collective op remains),
        between two barriers."""
        from .... import io
        self._rank0_writes(lambda: io.save_inference_model(
            dirname, feeded_var_names, target_vars, executor,
            main_program or self._origin_program or self.main_program,
            export_for_deployment=export_for_deployment))

    def _rank0_writes(self, write: Any) -> None:
        world = _comm.world()
        world.barrier()
        if self._role().is_first_worker():
            write()
        world.barrier()


class CollectiveOptimizer(_fb.DistributedOptimizer):
    """``fleet.distributed_optimizer(opt, strategy)``: ``minimize`` = the optimizer's backward,
    the data-parallel pass (``fluidlite.distributed.data_parallel``), then its clip,
    regularization and update ops, in one build transaction.

    Args:
        optimizer (Optimizer): the optimizer whose backward, clip, regularization and update ops
            are used.
        strategy (DistributedStrategy): the collective settings.
    Returns:
        CollectiveOptimizer: the wrapper; ``minimize(loss, startup_program=None,
        parameter_list=None, no_grad_set=None)`` returns ``(optimize_ops, params_grads)`` and
        sets ``fleet.main_program`` / ``fleet.startup_program``.
    Raises:
        TypeError: ``strategy`` is not a ``DistributedStrategy``; in ``minimize``, ``loss`` is not
            a Variable.
        ValueError: in ``minimize``, the strategy turns on ``use_dist_fc``, ``forward_recompute``,
            ``use_amp`` or ``use_hierarchical_allreduce``.

    Example:
        >>> import numpy as np
        >>> import fluidlite as fluid
        >>> from fluidlite.incubate.fleet.base import role_maker
        >>> from fluidlite.incubate.fleet.collective import fleet, DistributedStrategy
        >>> fleet.init(role_maker.UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:6170"]))
        >>> main, startup = fluid.Program(), fluid.Program()
        >>> with fluid.program_guard(main, startup):
        ...     loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [-1, 2]), size=1))
        ...     opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
        ...     _ = opt.minimize(loss)
        >>> type(opt).__name__, fleet.worker_num()
        ('CollectiveOptimizer', 1)
    """

    def __init__(self, optimizer: Any, strategy: DistributedStrategy) -> None:
        if not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"distributed_optimizer: strategy must be a DistributedStrategy, "
                            f"got {strategy!r}")
        self._optimizer = optimizer
        self._strategy = strategy

    def backward(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None, no_grad_set: Any = None,
                 callbacks: Any = None) -> Any:
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set,
                                        callbacks)

    def apply_gradients(self, params_grads: Any) -> Any:
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss: Variable, startup_program: Optional[Program] = None,
                 parameter_list: Optional[Sequence[Any]] = None,
                 no_grad_set: Any = None) -> Tuple[List[Any], Any]:
        """Returns ``(optimize_ops, params_grads)`` as ``Optimizer.minimize``; sets
        ``fleet.main_program`` / ``fleet.startup_program``."""
        if not isinstance(loss, Variable):
            raise TypeError(f"The loss should be an Variable, but received "
                            f"{type(loss).__name__}")
        if fleet._role_maker is None:
            fleet.init()
        unsupported = [k for k in ("use_dist_fc", "forward_recompute",
                                   "use_amp", "use_hierarchical_allreduce")
                       if getattr(self._strategy, k, False)]
        if unsupported:
            raise ValueError(f"DistributedStrategy: {', '.join(unsupported)} is not provided "
                             f"by fluidlite's collective mode (plain data parallel with "
                             f"all-reduce); set it to False")
        opt = self._optimizer
        main = loss.block.program
        startup = startup_program if startup_program is not None else \
            default_startup_program()
        parameter_list = parameter_list if parameter_list else opt._parameter_list
        with rewrite.transaction(main, startup):
            params_grads = opt.backward(loss, startup_program=startup,
                                        parameter_list=parameter_list, no_grad_set=no_grad_set)
            st = self._strategy
            if st.use_local_sgd:
                optimize_ops = self._local_sgd(main, startup, params_grads, loss)
            else:
                bucket = int(st.fuse_grad_size_in_MB * (1 << 20)) if st.fuse_all_reduce_ops \
                    else 0
                params_grads = data_parallel.apply(
                    main, startup, params_grads, nrings=int(st.nccl_comm_num),
                    bucket_bytes=bucket, overlap=bool(getattr(st, "overlap_allreduce", True)))
                optimize_ops = opt._apply_optimize(loss, startup, params_grads, opt._grad_clip)
        fleet.main_program = main
        fleet._origin_program = main
        fleet.startup_program = startup
        return optimize_ops, params_grads

    def _local_sgd(self, main: Program, startup: Program, params_grads: Any,
                   loss: Variable) -> Any:
        """LocalSGD: the optimizer's update ops on the local gradients, then the parameter
        averaging every ``local_sgd_steps`` steps (``fluidlite.distributed.local_sgd``)."""
        st = self._strategy
        k, warm = st.local_sgd_steps, st.local_sgd_is_warm_steps
        cfg = st.local_sgd_config
        if cfg is not None:
            get = cfg.get if isinstance(cfg, dict) else (lambda n, d: getattr(cfg, n, d))
            k = get("local_sgd_steps", k)
            warm = get("local_sgd_is_warm_steps", warm)
        world = _comm.world()
        live = [(p, g) for p, g in params_grads if g is not None]
        data_parallel.check_same_gradients(live, world)
        optimize_ops = self._optimizer._apply_optimize(loss, startup, params_grads,
                                                       self._optimizer._grad_clip)
        local_sgd.apply(main, startup, [p for p, _ in live], world.rank, world.size,
                        k_steps=k, begin_step=warm, nrings=int(st.nccl_comm_num))
        return optimize_ops


fleet = Collective()
Fleet = Collective
