"""What a start with a cache did, read from the cache root's files before and after it (:func:`cache_outcome`); its
line (:meth:`CacheOutcome.describe`) ends the cache's line in the start-up log."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class CacheOutcome:
    """What a start with a cache did, read from the cache root's files before and after it: the compiled graphs
    vLLM saved (none when it loaded them: a load saves nothing) and the Triton kernels it compiled."""

    graphs_saved: int  # new compiled-graph artefacts (``artifact_compile_range_*``, the AOT ``model``)
    kernels_shipped: int
    kernels_compiled: int
    seconds: float

    def describe(self) -> str:
        """
        >>> CacheOutcome(0, 266, 0, 58.3).describe()
        'at start: graphs loaded, 0 Triton kernels compiled (266 shipped), 58.3 s'
        >>> CacheOutcome(3, 266, 11, 150.0).describe()
        'at start: graphs compiled again (3 saved), 11 Triton kernels compiled (266 shipped), 150.0 s'
        """
        graphs = "graphs loaded" if self.graphs_saved == 0 else f"graphs compiled again ({self.graphs_saved} saved)"
        return (f"at start: {graphs}, {self.kernels_compiled} Triton kernels compiled ({self.kernels_shipped} "
                f"shipped), {self.seconds:.1f} s")


def is_graph_artefact(relative: str) -> bool:
    """A file vLLM writes when it compiles a graph rather than loads it (0.26: the standalone adaptor saves
    ``<cache>/<hash>/rank_R/<prefix>/artifact_compile_range_*``; the AOT path saves ``torch_aot_compile/<hash>/model``).

    >>> is_graph_artefact("vllm/torch_compile_cache/de26054562/rank_0_0/backbone/artifact_compile_range_1_2048_subgraph_0")
    True
    >>> is_graph_artefact("vllm/torch_compile_cache/torch_aot_compile/0a1b/model")
    True
    >>> is_graph_artefact("vllm/torch_compile_cache/de26054562/rank_0_0/inductor_cache/ab/cabc.py")
    False
    """
    parts = relative.split("/")
    return parts[-1].startswith("artifact_compile_range") or (parts[-1] == "model" and "torch_aot_compile" in parts)


# ---- I/O at the edges ----------------------------------------------------------------------------------------


def kernel_names(root: Path) -> set[str]:
    """The Triton kernels (directories named by their hash) under ``root``'s ``triton/`` and every ``triton_cache``."""
    folders = [root / "triton", *root.rglob("triton_cache")]
    return {k.name for f in folders if f.is_dir() for k in f.iterdir() if k.is_dir()}


def root_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


def cache_outcome(root: Path, files_before: set[str], kernels_before: set[str], seconds: float) -> CacheOutcome:
    """:class:`CacheOutcome` of a start from the cache copy at ``root``, given its files and kernels before it."""
    new = root_files(root) - files_before
    kernels = kernel_names(root)
    return CacheOutcome(sum(is_graph_artefact(f) for f in new), len(kernels_before), len(kernels - kernels_before),
                        seconds)
