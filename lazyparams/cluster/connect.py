"""Connecting to a Dask cluster and fitting parts to what its workers hold.

A cluster is a `distributed.Client`, the address of a running scheduler (`tcp://host:8786`)
or `local:N`, a `LocalCluster` of N single-threaded worker processes on this machine. Parts
ask for their predicted peak of the `lazyparams-memory` resource, which workers declare as
their budget, so no worker runs more parts at once than its budget holds. Imports the engine
and `distributed`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from distributed import Client, LocalCluster

from lazyparams.engine.sizes import format_bytes
from lazyparams.errors import ConvertError

MEMORY_RESOURCE = "lazyparams-memory"
"""The Dask resource a worker declares as its budget (bytes), and each part asks its peak of."""
LOCAL_PREFIX = "local:"


@dataclass(frozen=True, slots=True)
class Workers:
    """The workers of a cluster: address -> budget in bytes (None: one thread, no resource)."""

    budgets: dict[str, int | None]

    def resources(self, peak: int) -> dict[str, float] | None:
        """What a part of `peak` bytes asks for: its peak of the resource, where declared."""
        if all(budget is None for budget in self.budgets.values()):
            return None
        return {MEMORY_RESOURCE: float(max(peak, 1))}


@contextlib.contextmanager
def connect(cluster: Any, budget: int | None) -> Iterator[Client]:
    """A client of `cluster`, closed after (with its LocalCluster) unless the caller's own.

    A `local:N` cluster's workers declare `budget` of the memory resource (without a budget,
    none: each runs one part at a time on its one thread).
    """
    if isinstance(cluster, Client):
        yield cluster
        return
    if not isinstance(cluster, str):
        raise ConvertError(
            f"cluster: expected a distributed.Client, a scheduler address or local:N, "
            f"got {type(cluster).__name__}"
        )
    if cluster.startswith(LOCAL_PREFIX):
        count = _local_count(cluster)
        resources = None if budget is None else {MEMORY_RESOURCE: float(budget)}
        with (
            LocalCluster(
                n_workers=count,
                threads_per_worker=1,
                processes=True,
                resources=resources,
                dashboard_address=":0",
            ) as local,
            Client(local) as client,
        ):
            yield client
        return
    with _remote(cluster) as client:
        yield client


def _local_count(cluster: str) -> int:
    text = cluster[len(LOCAL_PREFIX) :]
    if not text.isdigit() or int(text) < 1:
        raise ConvertError(f"cluster: expected local:N with N a positive number, got {cluster!r}")
    return int(text)


@contextlib.contextmanager
def _remote(address: str) -> Iterator[Client]:
    """A client of the scheduler at `address`; ConvertError when it cannot be reached."""
    try:
        client = Client(address, timeout=30)
    except (OSError, TimeoutError) as err:
        raise ConvertError(
            f"cluster {address}: cannot reach the scheduler: {err}; expected a running Dask "
            "scheduler at that address"
        ) from None
    with client:
        yield client


def cluster_workers(client: Client) -> Workers:
    """The workers and their budgets; ConvertError when there are none."""
    info = client.scheduler_info(n_workers=-1)["workers"]
    if not info:
        raise ConvertError("cluster: the scheduler has no workers; expected at least one")
    budgets: dict[str, int | None] = {}
    for address, worker in sorted(info.items()):
        declared = worker.get("resources", {}).get(MEMORY_RESOURCE)
        budgets[address] = None if declared is None else int(declared)
        if declared is None and worker.get("nthreads", 1) > 1:
            raise ConvertError(
                f"cluster worker {address}: runs {worker['nthreads']} threads without a "
                f"{MEMORY_RESOURCE!r} resource, so its parts could exceed the budget together; "
                f"expected workers started with --resources {MEMORY_RESOURCE}=BYTES or "
                "--nthreads 1"
            )
    return Workers(budgets)


def check_capacity(workers: Workers, peak: int) -> None:
    """Refuse a part no worker can take (it would wait forever), before anything runs."""
    declared = [b for b in workers.budgets.values() if b is not None]
    if declared and max(declared) < peak:
        raise ConvertError(
            f"cluster: the largest part needs {format_bytes(peak)} but the workers declare at "
            f"most {format_bytes(max(declared))} of {MEMORY_RESOURCE!r}; expected at least one "
            "worker whose budget holds every part"
        )


__all__ = ["MEMORY_RESOURCE", "Workers", "check_capacity", "cluster_workers", "connect"]
