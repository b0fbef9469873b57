"""The ``paddle`` namespace of fluid 1.x scripts, for ``fluidlite run`` only.

Inside ``fluidlite run SCRIPT.py`` (``run.py``) ``import paddle`` gives this package and
``import paddle.fluid as fluid`` gives ``fluidlite``, so a fluid 1.x script runs unchanged. The
package provides what such scripts use besides fluid: ``paddle.batch``, the reader decorators
(``paddle.reader.shuffle(reader, buf_size)``, ``buffered``, ``compose``, ...) and the dataset
readers (``paddle.dataset.mnist.train()``, ``uci_housing``, ``cifar``, ``imdb``, ``imikolov``),
which read the files Paddle downloaded into ``~/.cache/paddle/dataset``. Outside ``fluidlite
run`` nothing is named ``paddle``: a real PaddlePaddle installation is never shadowed.
"""
from __future__ import annotations

from ..pipeline.decorators import batch
from . import dataset, reader

__all__ = ["batch", "dataset", "reader"]
__version__ = "1.8.5"      # the fluid API this namespace stands for (scripts print or check it)
