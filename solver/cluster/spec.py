"""What ``--cluster`` names, parsed before anything starts (pure; Ray is not imported here)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from solver.config import Layout
from solver.errors import BadInput, RunFailed

__all__ = ["ClusterError", "ClusterFailed", "ClusterKind", "ClusterSpec", "actor_count", "death_reason",
           "parse_cluster", "shared_gpus"]

ClusterKind = Literal["local", "auto", "address"]


class ClusterError(BadInput, ValueError):
    """A cluster that cannot be used as asked; the message is one line meant for the user."""


class ClusterFailed(RunFailed, RuntimeError):
    """A cluster run that could not finish: no engine actor started, or actors died under some problems."""


@dataclass(frozen=True)
class ClusterSpec:
    """``local:N`` starts a private Ray on this machine with N engine actors; ``auto`` joins the Ray cluster
    this machine belongs to (``ray start`` ran here); ``ray://HOST:PORT`` joins one through Ray Client.
    ``actors`` None means: as many as the cluster's GPUs hold engines (one on a cluster without GPUs)."""

    kind: ClusterKind
    actors: int | None = None
    address: str | None = None

    @property
    def ray_address(self) -> str | None:
        """What ``ray.init(address=...)`` gets: None starts a local Ray."""
        return {"local": None, "auto": "auto", "address": self.address}[self.kind]


_ADDRESS = re.compile(r"^ray://[A-Za-z0-9._\-\[\]:]+:\d+$")


def parse_cluster(text: str, actors: int | None = None) -> ClusterSpec:
    """``--cluster`` (and ``--actors``) as a spec; ClusterError with one line for anything else.

    >>> parse_cluster("local:2")
    ClusterSpec(kind='local', actors=2, address=None)
    >>> parse_cluster("auto", actors=4)
    ClusterSpec(kind='auto', actors=4, address=None)
    >>> parse_cluster("ray://10.0.0.5:10001").ray_address
    'ray://10.0.0.5:10001'
    >>> parse_cluster("local:0")
    Traceback (most recent call last):
    ...
    solver.cluster.spec.ClusterError: --cluster local:N needs N >= 1, got 'local:0'
    >>> parse_cluster("10.0.0.5:6379")
    Traceback (most recent call last):
    ...
    solver.cluster.spec.ClusterError: --cluster expects local:N, auto or ray://HOST:PORT, got '10.0.0.5:6379'
    """
    if actors is not None and actors < 1:
        raise ClusterError(f"--actors must be >= 1, got {actors}")
    if text.startswith("local:"):
        count = text.partition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise ClusterError(f"--cluster local:N needs N >= 1, got {text!r}")
        if actors is not None and actors != int(count):
            raise ClusterError(f"--cluster {text} already says {count} actors; drop --actors {actors}")
        return ClusterSpec("local", int(count))
    if text == "auto":
        return ClusterSpec("auto", actors)
    if _ADDRESS.match(text):
        return ClusterSpec("address", actors, text)
    raise ClusterError(f"--cluster expects local:N, auto or ray://HOST:PORT, got {text!r}")


def actor_count(spec: ClusterSpec, cluster_gpus: float, layout: Layout, cluster_cpus: float = 1e9) -> int:
    """Engine actors to start, each one engine of ``layout`` (``Layout.of(config.engine.args)``): the spec's count,
    else as many engines as the GPUs hold, else one. Ray would keep actors that do not fit waiting forever, so a
    count the cluster cannot hold is an error.

    >>> from solver.config import parse_layout
    >>> actor_count(ClusterSpec("auto"), 8.0, parse_layout("tp4")), actor_count(ClusterSpec("auto"), 0.0, Layout())
    (2, 1)
    >>> actor_count(ClusterSpec("auto"), 2.0, parse_layout("tp4"))
    Traceback (most recent call last):
    ...
    solver.cluster.spec.ClusterError: one engine needs 4 GPUs (tensor x pipeline x data parallel); the cluster has 2
    >>> actor_count(ClusterSpec("local", 3), 4.0, parse_layout("tp2"))
    Traceback (most recent call last):
    ...
    solver.cluster.spec.ClusterError: 3 engine actors x 2 GPUs each do not fit the cluster's 4 GPUs
    >>> actor_count(ClusterSpec("auto", 4), 0.0, Layout(), cluster_cpus=2)
    Traceback (most recent call last):
    ...
    solver.cluster.spec.ClusterError: 4 engine actors need a CPU slot each; the cluster has 2
    """
    engine_gpus = layout.engine_gpus
    if spec.actors is None:
        if cluster_gpus <= 0:
            return 1
        count = int(cluster_gpus // engine_gpus)
        if count < 1:
            raise ClusterError(f"one engine needs {engine_gpus} GPUs (tensor x pipeline x data parallel); "
                               f"the cluster has {cluster_gpus:g}")
        return count
    if cluster_gpus > 0 and spec.actors * engine_gpus > cluster_gpus:
        raise ClusterError(f"{spec.actors} engine actors x {engine_gpus} GPUs each do not fit the cluster's "
                           f"{cluster_gpus:g} GPUs")
    if spec.actors > cluster_cpus:
        raise ClusterError(f"{spec.actors} engine actors need a CPU slot each; the cluster has {cluster_cpus:g}")
    return spec.actors


def death_reason(message: str) -> str:
    """One line on why an actor died, from Ray's error text (its exit detail when Ray gives one).

    >>> death_reason("The actor died unexpectedly before finishing this task.\\n\\tclass_name: A\\n"
    ...              "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR "
    ...              "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. "
    ...              "Some common causes include: (1) the process was killed by the OOM killer")
    'SYSTEM_ERROR: Worker unexpectedly exits with a connection error code 2. End of file.'
    >>> death_reason("The actor died because of an error raised in its creation task, ray::A.__init__()\\n"
    ...              "  File x\\nRuntimeError: engine failed")
    'RuntimeError: engine failed'
    >>> death_reason("")
    'unknown cause'
    """
    kind = re.search(r"Worker exit type: (\w+)", message)
    detail = re.search(r"Worker exit detail: (.*?)(?: Some common causes|$)", message, re.S)
    if detail:
        text = " ".join(detail.group(1).split())
        return f"{kind.group(1)}: {text}" if kind else text
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    errors = [line for line in lines if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit)\b", line)]
    if errors:
        return errors[-1]
    return lines[-1] if lines else "unknown cause"


def shared_gpus(actors: Sequence[Any]) -> list[str]:
    """A line for each GPU that two engine actors on one host both see (``ActorInfo``: ``name``, ``host``,
    ``gpus`` = their CUDA_VISIBLE_DEVICES). Ray gives each actor its own; a GPU seen twice means it did not
    (``RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES`` set, or GPUs hidden from Ray), and the second engine to ask
    for the GPU's memory would fail or starve the first. Actors that see no list (CPU) are not compared.

    >>> from types import SimpleNamespace as A
    >>> shared_gpus([A(name="engine-0", host="h", gpus="0"), A(name="engine-1", host="h", gpus="1")])
    []
    >>> shared_gpus([A(name="engine-0", host="h", gpus="0,1"), A(name="engine-1", host="h", gpus="1")])
    ['GPU 1 on h is visible to engine-0 and engine-1']
    >>> shared_gpus([A(name="engine-0", host="h", gpus=None), A(name="engine-1", host="g", gpus="0")])
    []
    """
    seen: dict[tuple[str, str], str] = {}
    lines = []
    for actor in actors:
        for gpu in (g.strip() for g in (actor.gpus or "").split(",") if g.strip()):
            first = seen.setdefault((actor.host, gpu), actor.name)
            if first != actor.name:
                lines.append(f"GPU {gpu} on {actor.host} is visible to {first} and {actor.name}")
    return lines
