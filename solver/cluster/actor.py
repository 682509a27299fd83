"""One engine actor: a vLLM engine (one GPU, or one tensor/pipeline/data-parallel group) and its own sandbox
pool, in one Ray worker process, so generated code runs on the machine that generated it.

The actor solves whole problems with the same ``ProblemSolver`` as a single-machine run, early stopping included,
and streams every finished repetition (and progress event) back to the driver as it finishes, then the result.
It writes nothing: the driver is the only writer of the run log. This module does not import Ray; the driver
wraps ``EngineActor`` with ``ray.remote``.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.config import Config
from solver.loop.problem import ProblemSolver, SolveEvent, SolverSession
from solver.types import Engine, Problem, ProblemResult, Repetition

ActorMessage = Repetition | SolveEvent | ProblemResult
"""What ``EngineActor.solve`` streams: repetitions and progress as they happen, the result last."""


# The driver's variables an engine needs as the driver has them, whatever environment Ray started the actor's worker
# with (a joined cluster's workers inherit ``ray start``'s shell, not the driver's): the machine's NCCL settings (on
# the two-GPU machines NVLink multicast stays off, as their NCCL settings say), CUDA's and vLLM's, the model hub's and
# tokenizers' paths and switches.
FORWARDED_PREFIXES = ("NCCL_", "CUDA_", "VLLM_", "TORCH_", "PYTORCH_", "NVIDIA_", "HF_", "TRANSFORMERS_",
                      "TIKTOKEN_", "TOKENIZERS_")
# Ray gives each actor its own GPUs through CUDA_VISIBLE_DEVICES; the compile cache gets a folder per actor (below).
NOT_FORWARDED = frozenset({"CUDA_VISIBLE_DEVICES", "VLLM_CACHE_ROOT"})


def forwarded_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The part of the driver's environment each engine actor sets in its own process before its engine starts.

    >>> forwarded_env({"NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "0,1", "VLLM_CACHE_ROOT": "/c", "HOME": "/r"})
    {'NCCL_NVLS_ENABLE': '0'}
    """
    return {k: v for k, v in sorted(environ.items()) if k.startswith(FORWARDED_PREFIXES) and k not in NOT_FORWARDED}


def logged_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables ``cluster.jsonl`` records per actor: NCCL's and CUDA's (no tokens or paths of other tools).

    >>> logged_env({"NCCL_NVLS_ENABLE": "0", "CUDA_VISIBLE_DEVICES": "1", "HF_TOKEN": "x"})
    {'NCCL_NVLS_ENABLE': '0'}
    """
    return {k: v for k, v in sorted(environ.items()) if k.startswith(("NCCL_", "CUDA_")) and k not in NOT_FORWARDED}


def actor_cache_root(name: str, environ: Mapping[str, str]) -> str:
    """The actor's own vLLM cache folder (torch.compile artefacts): a subfolder named after it of the driver's
    ``VLLM_CACHE_ROOT`` (vLLM's default ``~/.cache/vllm`` without one). Two engines compiling into one folder at once
    race over its files (so one ``VLLM_CACHE_ROOT`` per process); under a fixed name an actor of
    a later run finds its warm cache again.

    >>> actor_cache_root("engine-1", {"VLLM_CACHE_ROOT": "/root/vllm-cache"})
    '/root/vllm-cache/engine-1'
    >>> actor_cache_root("engine-0", {"XDG_CACHE_HOME": "/x"})
    '/x/vllm/engine-0'
    """
    base = environ.get("VLLM_CACHE_ROOT") or str(Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "vllm")
    return str(Path(base) / name)


COMPILE_CACHE = "torch_compile_cache"  # vLLM's torch.compile artefacts under VLLM_CACHE_ROOT


def seed_compile_cache(base: Path, own: Path) -> bool:
    """Copy the shared folder's compiled artefacts into an actor's own folder the first time it is used, so the
    actor's engine starts warm where an engine of the same settings compiled before (gpt-oss-120b on an H100: 99.9 s
    warm against 130.6 s cold, benchmarks/results/h100_startup_gptoss_{warm,cold}.json). The copy is the actor's alone: no engine writes into another's.
    False when there is nothing to copy or the folder is already in use.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> (root / COMPILE_CACHE / "abc").mkdir(parents=True)
    >>> seed_compile_cache(root, root / "engine-0"), (root / "engine-0" / COMPILE_CACHE / "abc").is_dir()
    (True, True)
    >>> seed_compile_cache(root, root / "engine-0")  # already its own
    False
    """
    source, target = base / COMPILE_CACHE, own / COMPILE_CACHE
    if own.exists() or not source.is_dir():
        return False
    import shutil

    try:
        shutil.copytree(source, target)
    except OSError:  # a cache being written as it is copied: the engine compiles what it lacks
        shutil.rmtree(own, ignore_errors=True)
        return False
    return True


class EngineDied(RuntimeError):
    """The actor's engine failed for good (vLLM's engine core exited); the actor is unusable."""


@dataclass(frozen=True)
class ActorInfo:
    """Where an actor runs, for the driver's messages and ``cluster.jsonl``."""

    name: str
    host: str
    pid: int
    engine: str
    gpus: str | None = None  # CUDA_VISIBLE_DEVICES in the actor's process: the GPUs Ray gave it (None: not set)
    cache_root: str | None = None  # its VLLM_CACHE_ROOT
    env: dict[str, str] | None = None  # its NCCL_* and CUDA_* variables (logged_env): what its engine inherits


class EngineActor:
    """Owns an engine and a sandbox pool for its whole life (``start`` ... ``close``)."""

    def __init__(self, name: str, omp_threads: str | None = None, env: Mapping[str, str] | None = None,
                 cache_base: str | None = None) -> None:
        # Ray gives every worker OMP_NUM_THREADS=<its CPU slots> (1 here) unless the driver set one. The engine
        # is not a one-slot task: its processes inherit this variable, so the driver's own value (or none,
        # letting torch and vLLM size their thread pools to the machine) is restored before they start.
        if omp_threads is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = omp_threads
        os.environ.update(env or {})  # the driver's engine variables (forwarded_env), before any engine starts
        self.name = name
        self._cache_base = cache_base  # the driver's VLLM_CACHE_ROOT (None: vLLM's default folder on this node)
        self._session: SolverSession | None = None
        self._serving: tuple[Engine, Any] | None = None  # what the solvers use (``wrap``)
        self._solvers: list[tuple[Config, ProblemSolver]] = []  # Config holds dicts: not hashable
        self._queues: dict[str, asyncio.Queue[Repetition | SolveEvent]] = {}

    async def start(self, config: Config) -> ActorInfo:
        """Start the sandbox pool, then the engine (the SolverSession's order: the pool is never a fork of a process
        holding engine or CUDA state). An engine that cannot start raises, and the driver reports why."""
        # Set here, not in __init__: the engine's processes inherit it (and a test's actor object never starts).
        base = {"VLLM_CACHE_ROOT": self._cache_base} if self._cache_base else {}
        own = actor_cache_root(self.name, {**os.environ, **base})
        await asyncio.to_thread(seed_compile_cache, Path(own).parent, Path(own))
        os.environ["VLLM_CACHE_ROOT"] = own
        session = SolverSession(config, on_repetition=self._forward, on_event=self._forward)
        await session.__aenter__()
        self._session = session
        assert session.engine is not None
        return ActorInfo(self.name, socket.gethostname(), os.getpid(), session.engine.name,
                         os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("VLLM_CACHE_ROOT"),
                         logged_env(os.environ))

    def wrap(self, engine: Engine, sandbox: Any) -> tuple[Engine, Any]:
        """The engine and sandbox the actor's solvers use: its own, as they are. A subclass may wrap them (a
        benchmark replaying recorded attempts on the real engine, ``benchmarks/layouts.py``); the actor keeps
        watching its own engine for death either way."""
        return engine, sandbox

    def _forward(self, item: Repetition | SolveEvent) -> None:
        if isinstance(item, Repetition) and item.status == "error" and self._engine_dead():
            return  # the engine died under it: not a sample of the model; the problem is re-queued elsewhere
        queue = self._queues.get(item.problem_id)
        if queue is not None:
            queue.put_nowait(item)

    def _engine_dead(self) -> bool:
        engine = self._session.engine if self._session is not None else None
        is_dead = getattr(engine, "is_dead", None)
        return bool(is_dead()) if callable(is_dead) else False

    def _solver(self, config: Config) -> ProblemSolver:
        """A solver for this run's settings on the actor's engine and pool (a sweep changes sampling, workers
        and prompts between runs, never the engine or the sandbox)."""
        session = self._session
        if session is None or session.engine is None or session.sandbox is None:
            raise EngineDied(f"{self.name} has no engine (start failed or the actor was closed)")
        if (config.engine, config.sandbox) != (session.config.engine, session.config.sandbox):
            raise ValueError(f"{self.name} was started with other engine or sandbox settings")
        for known, solver in self._solvers:
            if known == config:
                return solver
        if self._serving is None:
            self._serving = self.wrap(session.engine, session.sandbox)
        engine, sandbox = self._serving
        solver = ProblemSolver(config, engine, sandbox, on_repetition=self._forward, on_event=self._forward)
        self._solvers.append((config, solver))
        return solver

    async def solve(self, config: Config, problem: Problem,
                    done: Sequence[Repetition] = ()) -> AsyncIterator[ActorMessage]:
        """Solve one problem, ``done`` being its repetitions already logged (kept, never run again), yielding
        each new repetition and event as it happens and the ``ProblemResult`` last."""
        solver = self._solver(config)
        if problem.id in self._queues:
            raise ValueError(f"{self.name} is already solving {problem.id}")
        queue: asyncio.Queue[Repetition | SolveEvent] = asyncio.Queue()
        self._queues[problem.id] = queue
        task = asyncio.create_task(solver.solve(problem, done=done), name=f"{self.name}-{problem.id}")
        try:
            while not task.done():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            while not queue.empty():
                yield queue.get_nowait()
            result = task.result()
            if self._engine_dead():
                raise EngineDied(f"the engine of {self.name} died while solving {problem.id}")
            yield result
        finally:
            self._queues.pop(problem.id, None)
            if not task.done():  # the driver went away: stop sampling (the solver aborts its requests)
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    async def pid(self) -> int:
        return os.getpid()

    async def close(self) -> None:
        session, self._session = self._session, None
        self._serving = None
        if session is not None:
            await session.close()
