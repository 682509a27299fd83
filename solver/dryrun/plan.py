"""``--dry-run``: a command parsed, planned and checked as written, with nothing heavy started (no engine, sandbox,
Ray, server or measuring), so that a GPU sitting is never the first run of a command's code path.

A dry run does what the command does up to its first heavy step: the same parsing, the same config, the same plan
and the same checks (bad input is the same one-line error, exit 2), then prints what it would run and exits 0.
An input it would read is read and checked where it is here. An input that only exists on the machine the command
is written for (``machine_only``: outside this checkout, e.g. ``$GPU_MODELS/...`` or ``$OUT``, or a path git
ignores inside it, e.g. the GPU kit's ``.gpu/`` carry or ``runs/``) is skipped and named, and everything else is
still checked; a missing input anywhere else in the checkout is the command's error, as in a real run.
``tests/test_readme_gpu_commands.py`` dry-runs every GPU command the READMEs write (benchmarks/README.md, "Dry
runs").
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout: solver/dryrun/plan.py -> the repository root


def inside(path: Path, folder: Path) -> bool:
    """
    >>> inside(Path("/r/a/b.xz"), Path("/r")), inside(Path("/tmp/b.xz"), Path("/r"))
    (True, False)
    """
    return path == folder or folder in path.parents


def ignored(path: Path) -> bool:
    """Whether git ignores ``path`` in this checkout (so it can never be committed by accident)."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--", str(path)], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def machine_only(path: Path | str) -> bool:
    """Whether ``path`` may be absent here and present where the command runs: outside this checkout, or inside it
    where git ignores it. A path elsewhere in the checkout is committed, so it must be here."""
    full = Path(path).expanduser().absolute()
    return not inside(full, ROOT) or ignored(full)


@dataclass
class DryRun:
    """What a command's dry run found: its plan (what it would run, one line each) and the inputs it could not
    check here, each with why."""

    command: str
    plan: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.plan.append(line)

    def present(self, path: Path | str, what: str, error: type[Exception] = ValueError) -> bool:
        """True when ``path`` (a file or folder) is here to be read and checked. Else, where it is
        ``machine_only``, it is named as skipped (False); anywhere else in the checkout, ``error`` (one line).

        >>> d = DryRun("x")
        >>> d.present(ROOT / "pyproject.toml", "--config"), d.present("/nowhere/model", "--model"), d.skipped
        (True, False, ['--model /nowhere/model: not on this machine (the one the command is written for has it)'])
        >>> d.present(ROOT / "no-such-file.csv", "DATA")
        Traceback (most recent call last):
        ...
        ValueError: DATA: no file or folder no-such-file.csv in this checkout
        """
        if Path(path).expanduser().exists():
            return True
        if not machine_only(path):
            shown = Path(path).absolute().relative_to(ROOT) if inside(Path(path).absolute(), ROOT) else path
            raise error(f"{what}: no file or folder {shown} in this checkout")
        self.skipped.append(f"{what} {path}: not on this machine (the one the command is written for has it)")
        return False

    def model(self, name: str | None, error: type[Exception] = ValueError) -> None:
        """Check ``engine.model`` as the engine would resolve it (``solver.models.resolve_model``: a local folder
        with its ``config.json``, or a hub id); a path only on the other machine is skipped. None: the embedded
        tiny model, not built by a dry run."""
        from solver.models import ModelError, resolve_model

        if name is None:
            self.add("model: the embedded tiny model")
            return
        try:
            self.add(f"model: {resolve_model(name)}")
        except ModelError as exc:
            if Path(name).expanduser().exists() or not machine_only(name):
                raise error(str(exc).splitlines()[0]) from exc
            self.skipped.append(f"--model {name}: not on this machine (the one the command is written for has it)")

    def gpus(self, engine_args: Mapping[str, Any], error: type[Exception] = ValueError) -> None:
        """One engine's GPUs (the layout its arguments ask for, ``Layout.of``: tensor x pipeline x data parallel)
        against those this process sees (``visible_gpus``: ``CUDA_VISIBLE_DEVICES``, as the engine's launch reads
        them); not checked where none is visible (a CPU machine)."""
        from solver.config import Layout
        from solver.engines.launch import visible_gpus

        need, seen = Layout.of(engine_args).engine_gpus, visible_gpus()
        if not seen:
            self.add(f"GPUs: none visible here; the engine spans {need}")
            return
        if need > len(seen):
            raise error(f"one engine spans {need} GPUs (tensor x pipeline x data parallel); {len(seen)} visible")
        self.add(f"GPUs: the engine spans {need} of the {len(seen)} visible ({','.join(seen)})")

    def engine_args(self, config: Any, error: type[Exception] = ValueError) -> None:
        """``engine.args`` against the vLLM the engine is written for (``solver.engines.engine_args``): the GPU
        kit's (kept as data) for a GPU engine, the one installed here for the CPU engine (skipped and named where
        none is); a name it does not take, or a value it would refuse (a closed set's, a bound's), is ``error``,
        one line with the nearest it takes. So are the names of ``sampling.extra`` that its ``SamplingParams``
        lacks (the vLLM engine's; a server's request body takes more)."""
        from solver.engines.engine_args import known_for

        known = known_for(config.engine.env)
        if known is None:
            self.skipped.append("engine.args: no vLLM installed here to check the CPU engine's names against")
            return
        message = known.refused(config.engine.args) or (
            known.unknown_sampling(config.sampling.extra) if config.engine.name == "vllm" else None)
        if message is not None:
            raise error(message)
        self.add(f"engine.args: {len(config.engine.args)} names, all vLLM {known.version}'s, values it takes")

    def engine(self, config: Any, error: type[Exception] = ValueError) -> None:
        """The engine ``config`` would start, checked without starting it: its arguments (``engine_args``), its
        model (named where the engine is a GPU's, ``solver.config.check_model_named``; found, ``model``) and its
        GPUs (``gpus``)."""
        from solver.config import check_model_named

        self.engine_args(config, error)
        try:
            check_model_named(config)
        except ValueError as exc:
            raise error(str(exc)) from exc
        self.model(config.engine.model, error)
        self.gpus(config.engine.args, error)

    def lines(self) -> list[str]:
        """The report, ``dry run:`` first: the command, its plan, what was skipped."""
        out = [f"dry run: {self.command}: parsed and checked; nothing started"]
        out += [f"dry run: plan: {line}" for line in self.plan]
        out += [f"dry run: skipped: {line}" for line in self.skipped]
        return out

    def print(self) -> int:
        """Print the report; the dry run's exit code (0)."""
        print("\n".join(self.lines()), flush=True)
        return 0


def engine_dry_run(command: str, config: Any, plan: str, fail: Callable[[str], Any]) -> int:
    """A command that starts one engine, dry-run: the engine ``config`` would start checked (``DryRun.engine``;
    ``fail``, e.g. an argument parser's ``error``, takes the one line that says what is wrong), then ``plan``
    printed as the command's plan; the exit code (0)."""
    dry = DryRun(command)
    try:
        dry.engine(config)
    except ValueError as exc:
        return fail(str(exc))
    dry.add(plan)
    return dry.print()
