"""Every command the READMEs write that starts an engine on a GPU, dry-run here as written (``--dry-run``: parsed,
planned and checked, its ``engine.args`` against the GPU kit's vLLM included, nothing started;
solver/dryrun/plan.py), so that a GPU sitting is never the first run of a command's code path.

A GPU command is every command of a fenced block whose info string says how many GPUs the machine it is written for
has (```` ```bash gpus=2 ````), and any other command of a shell block that starts an engine on a GPU: a GPU preset
(``--preset`` of a preset whose engine is not the CPU one), ``--gpu``, ``$GPU_MODELS`` or a ``/models/`` path. It is
checked by default; a block whose commands cannot be dry-run names why on its fence (```` ```bash
no-dry-run="why" ````), and its commands are listed as not checked. Each command runs with its block's GPUs visible
(``CUDA_VISIBLE_DEVICES``, which the commands' own GPU checks read; one where the fence names none), ``$VARS``
assigned earlier in the block expanded (``G="..."``, ``L=...``) and the machine's own ones given here (``$OUT``: a
fresh folder; ``$GPU_MODELS``: the GPU kit's model folder, absent here, so the model is named as skipped). Set-up
lines (the kit's ``install.sh``, ``. /root/gpu/env.sh``, ``export``, ``mkdir``, ``cp``, ``rm``, ``chmod``) are not
commands to check.
The test ids list every command checked (``pytest --collect-only -q tests/test_readme_gpu_commands.py``);
benchmarks/README.md, "Dry runs", says how a new GPU command joins them.
"""

from __future__ import annotations

import os
import re
import runpy
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"

DOCS = ["README.md", "benchmarks/README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
        "kaggle/README.md", "evaluation/README.md", "benchmarks/gpu_sitting.md"]
FENCE = re.compile(r"^```(\S*)(.*)$")
GPUS = re.compile(r"\bgpus=(\d+)\b")
WHY_NOT = re.compile(r'\bno-dry-run="([^"]*)"')  # on a fence: why its commands cannot be dry-run
SHELL = ("", "bash", "sh", "shell", "console")  # the fences whose lines are commands
GPU_ONLY = ("$GPU_MODELS", "/root/gpu")  # what only a GPU machine has: a block naming them must be marked
MACHINE = {"GPU_MODELS": "/root/gpu/models", "PWD": str(ROOT), "PYTHONPATH": ""}  # the GPU machine's own; $OUT below
SET_UP = ("bash", ".", "source", "export", "mkdir", "cp", "cd", "rm", "chmod")
VAR = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
ASSIGN = re.compile(r"^(\w+)=(.*)$")


@dataclass(frozen=True)
class Block:
    doc: str
    line: int  # of the opening fence, 1-based
    info: str
    text: str

    @property
    def gpus(self) -> int | None:
        found = GPUS.search(self.info)
        return int(found.group(1)) if found else None

    @property
    def not_checked(self) -> str | None:
        """Why the block's commands are not dry-run, as its fence says; None: they are."""
        found = WHY_NOT.search(self.info)
        return found.group(1).strip() if found else None

    @property
    def shell(self) -> bool:
        return self.info.split(" ")[0] in SHELL


@dataclass(frozen=True)
class GpuCommand:
    doc: str
    line: int  # where the command starts in its file
    part: int  # its place among the commands of that line (``&&``), from 1
    gpus: int
    program: str  # benchmarks/NAME.py or solver
    argv: tuple[str, ...]  # as written, $VARS not yet expanded
    assigned: tuple[tuple[str, str], ...]  # the block's variables before it, as written
    not_checked: str | None = None  # why not dry-run, as its block's fence says; None: dry-run

    @property
    def id(self) -> str:
        sub = self.argv[0] if self.program in ("solver", "layouts.py") and self.argv else ""  # its subcommand
        return f"{self.doc}:{self.line}{f'.{self.part}' if self.part > 1 else ''} {self.program} {sub}".strip()


def blocks(doc: str) -> list[Block]:
    out, opened, body = [], None, []
    for number, line in enumerate((ROOT / doc).read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence and opened is None:
            opened, body = (number, fence.group(1) + fence.group(2)), []
        elif line.startswith("```") and opened is not None:
            out.append(Block(doc, opened[0], opened[1], "\n".join(body)))
            opened = None
        elif opened is not None:
            body.append(line)
    return out


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """The block's lines with ``\\`` continuations joined, each with its line number in the file."""
    out: list[tuple[int, str]] = []
    pending, start = "", 0
    for offset, line in enumerate(block.text.splitlines(), 1):
        if not pending:
            start = block.line + offset
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def segments(line: str) -> list[str]:
    """A shell line cut into its commands (``&&``, ``;``), each without what it pipes into or redirects."""
    words = shlex.split(line, comments=True, posix=False)
    out: list[list[str]] = [[]]
    piped = False
    for word in words:
        if word in ("&&", ";", "||"):
            out.append([])
            piped = False
        elif word == "|" or piped:
            piped = True
        elif word.endswith(";"):
            out[-1].append(word[:-1])
            out.append([])
        elif not re.fullmatch(r"\d?>&?\d?\S*", word):
            out[-1].append(word)
    return [" ".join(words) for words in out if words]


def gpu_presets() -> set[str]:
    """The presets whose engine runs on a GPU: every one but the CPU engine's (``cpu_engine``, the rule that also
    picks the vLLM a dry run checks ``engine.args`` against)."""
    from solver.config.loading import load_preset, presets
    from solver.config import cpu_engine

    return {p for p in presets() if not cpu_engine((load_preset(p).get("engine") or {}).get("env") or {})}


def starts_gpu_engine(words: list[str], presets: set[str]) -> bool:
    """Whether a command (its words, as written) starts an engine on a GPU: a GPU preset, ``--gpu``, the GPU kit's
    models (``$GPU_MODELS``) or a ``/models/`` path.

    >>> gpu = {"h100", "h100-gptoss"}
    >>> starts_gpu_engine("solver kaggle-local t.csv --preset h100".split(), gpu)
    True
    >>> starts_gpu_engine("solver solve t.csv --preset tiny".split(), gpu), starts_gpu_engine(["solver", "demo"], gpu)
    (False, False)
    >>> starts_gpu_engine("python benchmarks/day.py --gpu".split(), gpu)
    True
    >>> starts_gpu_engine("solver serve --model /models/m".split(), gpu)
    True
    """
    preset = {b for a, b in zip(words, words[1:]) if a == "--preset"}
    preset |= {w.partition("=")[2] for w in words if w.startswith("--preset=")}
    return bool(preset & presets) or "--gpu" in words or any("$GPU_MODELS" in w or "/models/" in w for w in words)


def parses(line: str) -> bool:
    """Whether a line reads as shell words (a block of commands may also show their output)."""
    try:
        for segment in segments(line):
            shlex.split(segment)
    except ValueError:
        return False
    return True


def gpu_commands() -> list[GpuCommand]:
    found = []
    presets = gpu_presets()
    for doc in DOCS:
        for block in blocks(doc):
            if not block.shell and block.gpus is None:
                continue
            assigned: list[tuple[str, str]] = []
            for number, line in logical_lines(block):
                if block.gpus is None and not parses(line) and not starts_gpu_engine(line.split(), presets):
                    continue  # not a shell line (a listing, a prompt's output) and nothing of a GPU in it
                for segment in segments(line):
                    words = shlex.split(segment)
                    assignment = ASSIGN.match(segment)
                    if assignment and len(words) == 1:
                        assigned.append((assignment.group(1), words[0].partition("=")[2]))
                        continue
                    while words and ASSIGN.match(words[0]):  # VAR=value before a command: its environment
                        words = words[1:]
                    if not words or words[0] in SET_UP:
                        continue
                    if block.gpus is None and not starts_gpu_engine(words, presets):
                        continue  # a CPU command (or no engine) in a block written for no GPU machine
                    if words[0] in ("python", "python3") and words[1:2] == ["-m"] and words[2:3] == ["solver"]:
                        program, argv = "solver", words[3:]
                    elif words[0] in ("python", "python3") and len(words) > 1 and words[1].startswith("benchmarks/"):
                        program, argv = Path(words[1]).name, words[2:]
                    elif words[0] == "solver":
                        program, argv = "solver", words[1:]
                    else:
                        program, argv = words[0], words[1:]  # unknown: its test fails and says so
                    part = 1 + sum(c.doc == doc and c.line == number for c in found)
                    found.append(GpuCommand(doc, number, part, block.gpus or 1, program, tuple(argv),
                                            tuple(assigned), block.not_checked))
    return found


FOUND = gpu_commands()
COMMANDS = [c for c in FOUND if c.not_checked is None]
NOT_CHECKED = [c for c in FOUND if c.not_checked is not None]
FLOOR = 54  # the GPU commands dry-run when every one became checked by default


def expand(text: str, variables: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in variables:
            raise AssertionError(f"${name} is neither assigned in its block nor one of the GPU machine's "
                                 f"({', '.join(sorted(variables))})")
        return variables[name]

    return VAR.sub(one, text)


def argv_of(command: GpuCommand, out: Path) -> list[str]:
    """The command's arguments with every variable expanded as its shell would (an assignment's value is expanded
    where it is made; an unquoted ``$G`` splits into words)."""
    variables = {**MACHINE, "OUT": str(out)}
    for name, value in command.assigned:
        variables[name] = expand(value, variables)
    argv: list[str] = []
    for word in command.argv:
        argv += shlex.split(expand(word, variables)) if word.startswith("$") else [expand(word, variables)]
    assert "..." not in argv, "an elided command ('...') cannot be checked: write it whole"
    return argv


def with_dry_run(argv: list[str]) -> list[str]:
    """``argv`` with ``--dry-run``: at the end, or before a ``--`` (what follows it goes to vLLM unchanged).

    >>> with_dry_run(["serve", "--model", "m", "--", "-tp", "1"]), with_dry_run(["day"])
    (['serve', '--model', 'm', '--dry-run', '--', '-tp', '1'], ['day', '--dry-run'])
    """
    cut = argv.index("--") if "--" in argv else len(argv)
    return [*argv[:cut], "--dry-run", *argv[cut:]]


def run(program: str, argv: list[str]) -> int:
    """The command's own entry point, in this process, with ``--dry-run``; its exit code. A benchmark is loaded as
    the script it is (``runpy``, not as an importable module) and its ``main`` called."""
    try:
        if program == "solver":
            from solver.cli import main

            return main(with_dry_run(argv))
        script = runpy.run_path(str(BENCHMARKS / program), run_name=program.removesuffix(".py"))
        return script["main"](with_dry_run(argv))
    except SystemExit as exc:  # argparse's own errors
        return exc.code if isinstance(exc.code, int) else 1


@pytest.fixture
def gpu_machine(monkeypatch, tmp_path):
    """This process as the GPU machine's: the repository's root as the working folder, ``$OUT`` a fresh folder, the
    environment restored afterwards (a command may set defaults in it)."""
    saved = dict(os.environ)
    monkeypatch.chdir(ROOT)
    out = tmp_path / "out"
    out.mkdir()
    yield out
    os.environ.clear()
    os.environ.update(saved)


def test_every_block_that_needs_a_gpu_machine_is_marked() -> None:
    unmarked = [f"{b.doc}:{b.line}" for doc in DOCS for b in blocks(doc)
                if b.gpus is None and b.not_checked is None and any(x in b.text for x in GPU_ONLY)]
    assert not unmarked, (f"blocks naming {' or '.join(GPU_ONLY)} without gpus=N (or no-dry-run=\"why\") in their "
                          f"fence: {unmarked}")


def test_the_readmes_write_gpu_commands() -> None:
    """As many as the READMEs wrote when every GPU command became checked by default: fewer means commands lost
    (or moved to blocks that say why they are not checked)."""
    assert len(COMMANDS) >= FLOOR and {c.gpus for c in COMMANDS} >= {1, 2, 4}


def test_a_command_not_dry_run_says_why() -> None:
    """A fence that takes its commands out of the dry runs gives a reason (``no-dry-run="..."``, not empty)."""
    bare = [c.id for c in NOT_CHECKED if len(c.not_checked or "") < 10]
    assert not bare, f"no-dry-run without a reason (a few words): {bare}"


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_the_gpu_command_dry_runs_as_written(command: GpuCommand, gpu_machine, monkeypatch, capfd) -> None:
    assert command.program == "solver" or (BENCHMARKS / command.program).is_file(), (
        f"{command.program}: not a benchmark or the solver CLI; a GPU command needs a dry run "
        "(solver/dryrun/plan.py)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(command.gpus)))
    argv = argv_of(command, gpu_machine)
    if command.program == "solver" and "kaggle-local" in argv:
        pytest.importorskip("vllm")  # the predictor's check of sampling.extra is vLLM's own (hidden in the fast tier)
    code = run(command.program, argv)
    printed = capfd.readouterr()
    assert code == 0, f"{command.program} {' '.join(argv)}\n{printed.out}\n{printed.err}"
    assert "dry run: " in printed.out and "parsed and checked; nothing started" in printed.out, printed.out
