"""The data pipeline: everything between the user's samples and ``Executor.run``'s feeds.

* ``reader.py`` -- ``DataLoader`` / ``PyReader`` (``fluid.io``, ``fluid.reader``): generator
  loaders with a background producer (``prefetch.py``) or worker process;
* ``dataset.py`` -- fluid's ``InMemoryDataset`` / ``QueueDataset`` (``fluid.dataset``);
* ``feeder.py`` -- ``DataFeeder`` and the argument checks (``fluid.data_feeder``);
* ``feed_desc.py`` -- ``DataFeedDesc`` (``fluid.data_feed_desc``);
* ``lod_tensor.py`` -- ``create_lod_tensor`` and friends (``fluid.lod_tensor``);
* ``decorators.py`` -- the reader decorators (``fluid.io.batch``, ``shuffle``, ``compose``, ...).

The fluid module paths above are thin modules at the top of the package.
"""
