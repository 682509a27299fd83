"""Every command that has ``--dry-run`` (the solver's subcommands and the benchmarks' scripts, found from their own
parsers), dry-run with its defaults: only the arguments it requires, then ``--dry-run``. The READMEs' commands are
dry-run as written by tests/test_readme_gpu_commands.py; here, each command's own defaults, which a user's first
run takes, so that a default path never meets its first run on a GPU (``solver day`` without a file that carries
tool times did: its dry run asked for fixed tool seconds it was never given)."""

from __future__ import annotations

import argparse
import os
import re
import runpy
from pathlib import Path

import pytest

from conftest import ROOT

BENCHMARKS = ROOT / "benchmarks"

# The arguments each command requires (``{tmp}``: a fresh folder), by (program, subcommand...); a command that
# gains --dry-run joins here (test_every_command_with_a_dry_run_is_here says which).
REQUIRED: dict[tuple[str, ...], list[str]] = {
    ("solver", "compile-cache", "build"): ["--out", "{tmp}/cache"],
    ("solver", "compile-cache", "check"): ["{tmp}/cache"],
    ("solver", "compile-cache", "pack"): ["{tmp}/vllm-cache-root", "--out", "{tmp}/cache"],
    ("solver", "day"): ["--json", "{tmp}/day.json"],
    ("solver", "serve"): [],
    ("solver", "solve"): ["demo", "--out", "{tmp}/run"],
    ("solver", "kaggle-local"): ["demo", "--out", "{tmp}/rehearsal"],
    ("solver", "solve"): ["demo", "--out", "{tmp}/run"],
    ("solver", "sweep"): ["demo", "--reps", "2", "--workers", "2", "--out", "{tmp}/sweep"],
    ("cluster.py",): [],
    ("day.py",): ["--json", "{tmp}/day.json"],
    ("engine.py",): [],
    ("layouts.py", "load"): [],
    ("moe_numerics.py",): [],
    ("layouts.py", "scaling"): [],
    ("layouts.py", "seed"): [],
    ("pressure.py",): [],
    ("probes.py",): ["--quick"],  # its default sizes are the GPU's: on the default (tiny) preset, bad input
    ("real_shape.py",): [],
    ("roofline.py",): ["--quick"],  # its default sizes are the GPU's, as probes.py's
    ("speculation.py",): ["--quick"],  # its default sizes are the GPU's, as probes.py's
    ("startup.py",): [],
}
# The commands whose defaults replay the recorded attempts (``solver.replay.attempts_path``: the dev extract in
# ../shared beside the checkout): where that file is missing their dry run says so in one line and fails, as it
# should, and the test is skipped with one line.
READS_ATTEMPTS = {("solver", "day"), ("day.py",), ("layouts.py", "scaling"), ("real_shape.py",)}


def solver_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("solver",)) -> set[tuple[str, ...]]:
    """The solver's (sub)commands whose parser has ``--dry-run``, walking its subparsers."""
    found = {path} if "--dry-run" in parser._option_string_actions else set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= solver_commands(sub, (*path, name))
    return found


def script_main(name: str):
    """A benchmark loaded as the script it is (``runpy``) and its ``main``."""
    return runpy.run_path(str(BENCHMARKS / name), run_name=name.removesuffix(".py"))["main"]


def help_of(main, argv: list[str], capsys) -> str:
    """What ``--help`` prints (argparse's exits; a script that dispatches on a subcommand may return instead)."""
    try:
        main([*argv, "--help"])
    except SystemExit:
        pass
    printed = capsys.readouterr()
    return printed.out + printed.err


def benchmark_commands(capsys) -> set[tuple[str, ...]]:
    """The benchmarks' scripts (and their subcommands) whose help offers ``--dry-run``: every script that parses
    arguments or hands them to the solver's CLI is asked for its help."""
    found: set[tuple[str, ...]] = set()
    for script in sorted(BENCHMARKS.glob("*.py")):
        text = script.read_text()
        if "--dry-run" not in text and "solver_main(" not in text:
            continue  # parses no --dry-run of its own and wraps no solver command
        main = script_main(script.name)
        shown = help_of(main, [], capsys)
        subs = re.search(r"usage: \S+ \{([\w,-]+)\}", shown)
        for sub in subs.group(1).split(",") if subs else [None]:
            argv = [] if sub is None else [sub]
            if "--dry-run" in (help_of(main, argv, capsys) if sub else shown):
                found.add((script.name, *argv))
    return found


def test_every_command_with_a_dry_run_is_here(capsys) -> None:
    from solver.cli import build_parser

    found = solver_commands(build_parser()) | benchmark_commands(capsys)
    assert found == set(REQUIRED), (f"with --dry-run but not dry-run here: {sorted(found - set(REQUIRED))}; "
                                    f"here but without --dry-run: {sorted(set(REQUIRED) - found)}")


@pytest.fixture
def checkout(monkeypatch, tmp_path):
    """This process in the repository's root (as the commands are written to run), no GPU visible, the
    environment restored afterwards (a command may set defaults in it)."""
    saved = dict(os.environ)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved)


@pytest.mark.parametrize("command", sorted(REQUIRED), ids=" ".join)
def test_the_command_dry_runs_with_its_defaults(command: tuple[str, ...], checkout, capfd) -> None:
    if command[:2] == ("solver", "kaggle-local"):
        pytest.importorskip("vllm")  # the predictor's check of sampling.extra is vLLM's own (hidden in the fast tier)
    if command in READS_ATTEMPTS:
        from solver.replay import attempts_path

        path = attempts_path()  # $SOLVER_ATTEMPTS, else ../shared beside the checkout, read from its root
        if not path.exists():
            pytest.skip(f"no recorded attempts at {path}")
    argv = [*command[1:], *(a.format(tmp=checkout) for a in REQUIRED[command]), "--dry-run"]
    shown = " ".join([command[0], *argv])
    try:
        if command[0] == "solver":
            from solver.cli import main

            code = main(argv)
        else:
            code = script_main(command[0])(argv)
    except SystemExit as exc:  # argparse's own errors
        code = exc.code if isinstance(exc.code, int) else 1
    printed = capfd.readouterr()
    assert code == 0, f"{shown}\n{printed.out}\n{printed.err}"
    assert "dry run: " in printed.out and "parsed and checked; nothing started" in printed.out, printed.out
    assert not any(Path(checkout).iterdir()), "a dry run wrote something"
