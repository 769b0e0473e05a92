"""Running partitioned plans on Dask distributed (the optional `lazyparams[dask]` extra).

`convert_on_cluster` is what `convert(..., cluster=...)` and `lazyparams convert --cluster`
run: each part of the plan is a Dask task that runs lazyparams' VM on a worker, within the
per-worker budget; the client publishes the output once every part is done. Imports the
engine and `distributed`.
"""

from lazyparams.cluster.connect import MEMORY_RESOURCE, connect
from lazyparams.cluster.run import ClusterReport, WorkerReport, convert_on_cluster
from lazyparams.engine.executor import Executor

__all__ = ["MEMORY_RESOURCE", "ClusterReport", "WorkerReport", "connect", "convert_on_cluster"]

# convert(..., cluster=...) finds convert_on_cluster by its entry point (pyproject.toml); this
# line has the type checker hold it to the engine's executor interface.
_EXECUTOR: Executor = convert_on_cluster
