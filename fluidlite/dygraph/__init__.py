"""``fluid.dygraph``: imperative mode on the same ops (see docs/guides/dygraph.md,
"Static and dygraph side by side"). Every op runs through its registered ``OpDef``
(``tracer.py``); gradients come from the same gradient rules (``autograd.py``)."""
from __future__ import annotations

from .autograd import backward, grad  # noqa: F401
from .base import (BackwardStrategy, disable_dygraph, disable_imperative,  # noqa: F401
                   enable_dygraph, enable_imperative, enabled, guard, no_grad, seed, to_tensor,
                   to_variable)
from .tensor import ParamBase, VarBase  # noqa: F401
from .tracer import Tracer  # noqa: F401
# what the passes below call in dygraph mode registers itself with core.mode on import: the
# dygraph branch of clipping and of the optimizers; step replay installs its replayer
from . import clip, optim, replay  # noqa: F401

Tensor = VarBase
from .layers import Layer, LayerList, ParameterList, Sequential  # noqa: F401,E402
from .nn import (BatchNorm, BilinearTensorProduct, Conv2D, Conv2DTranspose,  # noqa: F401,E402
                 Dropout, Embedding, Flatten, GroupNorm, GRUUnit, InstanceNorm,
                 LayerNorm, Linear, PRelu, Pool2D, SpectralNorm)
from .checkpoint import load_dygraph, save_dygraph  # noqa: F401,E402
from .learning_rate_scheduler import (CosineDecay, ExponentialDecay,  # noqa: F401,E402
                                      InverseTimeDecay, LearningRateDecay, LinearLrWarmup,
                                      NaturalExpDecay, NoamDecay, PiecewiseDecay,
                                      PolynomialDecay, ReduceLROnPlateau, StepDecay,
                                      MultiStepDecay, LambdaDecay)
# issue 17: data-parallel dygraph on MPI (fluid.dygraph.parallel / fluid.dygraph.DataParallel)
from . import parallel  # noqa: F401,E402
from .parallel import DataParallel, ParallelEnv, prepare_context  # noqa: F401,E402
from .traced import TracedLayer  # noqa: F401,E402
# issue 16: the 3-D convolution layers of fluid 1.8
from .nn3d import Conv3D, Conv3DTranspose  # noqa: F401,E402
# fluid 1.8 defines them in dygraph/nn.py (``fluid.dygraph.nn.Conv3D``); nn3d builds on nn, so
# nn cannot import them without a cycle
from . import nn as _nn  # noqa: E402
_nn.Conv3D, _nn.Conv3DTranspose = Conv3D, Conv3DTranspose
# issue 12: dygraph to static by tracing (fluid.dygraph.declarative / ProgramTranslator)
from . import declarative as dygraph_to_static  # noqa: F401,E402
from .declarative import ProgramTranslator, declarative, to_static  # noqa: F401,E402
from . import jit  # noqa: F401,E402  (fluid.dygraph.jit: both of the above)
# issue 12: the remaining fluid 1.8 dygraph classes
from .nn import BCELoss, L1Loss, MSELoss, NCE, NLLLoss, TreeConv  # noqa: F401,E402
# issue 29: fluid 1.8's dygraph.static_runner (a saved inference model as a trainable Layer)
from . import static_runner  # noqa: F401,E402
from .static_runner import StaticModelRunner  # noqa: F401,E402
