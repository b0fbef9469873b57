"""``fluid.dataset`` (the datasets of fluid 1.8):
the fluid 1.8 module path; the code lives in ``fluidlite/pipeline/dataset.py``."""
from .pipeline.dataset import (  # noqa: F401
    DatasetFactory, DatasetBase, InMemoryDataset, QueueDataset, FileInstantDataset,
    DatasetLoader)

__all__ = ["DatasetFactory",
           "DatasetBase",
           "InMemoryDataset",
           "QueueDataset",
           "FileInstantDataset",
           "DatasetLoader"]
