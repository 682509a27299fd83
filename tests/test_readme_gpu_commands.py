"""Every GPU command the READMEs write, dry-run here as written (``--dry-run``: parsed, planned and checked, nothing
started; solver/commands/dryrun.py), so that a GPU sitting is never the first run of a command's code path.

A GPU command is a line of a fenced block whose info string says how many GPUs the machine it is written for has:
```` ```bash gpus=2 ````. Each command of such a block runs with that many GPUs visible (``CUDA_VISIBLE_DEVICES``,
which the commands' own GPU checks read), ``$VARS`` assigned earlier in the block expanded (``G="..."``, ``L=...``)
and the machine's own ones given here (``$OUT``: a fresh folder; ``$GPU_MODELS``: the GPU kit's model folder,
absent here, so the model is named as skipped). Set-up lines (the kit's ``install.sh``, ``. /root/gpu/env.sh``,
``export``, ``mkdir``, ``cp``) are not commands to check. The test ids list every command checked
(``pytest --collect-only -q tests/test_readme_gpu_commands.py``); benchmarks/README.md, "Dry runs", says how a new
GPU command joins them.
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
GPU_ONLY = ("$GPU_MODELS", "/root/gpu")  # what only a GPU machine has: a block naming them must be marked
MACHINE = {"GPU_MODELS": "/root/gpu/models", "PWD": str(ROOT), "PYTHONPATH": ""}  # the GPU machine's own; $OUT below
SET_UP = ("bash", ".", "source", "export", "mkdir", "cp", "cd")
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


@dataclass(frozen=True)
class GpuCommand:
    doc: str
    line: int  # where the command starts in its file
    part: int  # its place among the commands of that line (``&&``), from 1
    gpus: int
    program: str  # benchmarks/NAME.py or solver
    argv: tuple[str, ...]  # as written, $VARS not yet expanded
    assigned: tuple[tuple[str, str], ...]  # the block's variables before it, as written

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


def gpu_commands() -> list[GpuCommand]:
    found = []
    for doc in DOCS:
        for block in blocks(doc):
            if block.gpus is None:
                continue
            assigned: list[tuple[str, str]] = []
            for number, line in logical_lines(block):
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
                    if words[0] in ("python", "python3") and words[1:2] == ["-m"] and words[2:3] == ["solver"]:
                        program, argv = "solver", words[3:]
                    elif words[0] in ("python", "python3") and len(words) > 1 and words[1].startswith("benchmarks/"):
                        program, argv = Path(words[1]).name, words[2:]
                    elif words[0] == "solver":
                        program, argv = "solver", words[1:]
                    else:
                        program, argv = words[0], words[1:]  # unknown: its test fails and says so
                    part = 1 + sum(c.doc == doc and c.line == number for c in found)
                    found.append(GpuCommand(doc, number, part, block.gpus, program, tuple(argv), tuple(assigned)))
    return found


COMMANDS = gpu_commands()


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


def run(program: str, argv: list[str]) -> int:
    """The command's own entry point, in this process, with ``--dry-run``; its exit code. A benchmark is loaded as
    the script it is (``runpy``, not as an importable module) and its ``main`` called."""
    try:
        if program == "solver":
            from solver.cli import main

            return main([*argv, "--dry-run"])
        script = runpy.run_path(str(BENCHMARKS / program), run_name=program.removesuffix(".py"))
        return script["main"]([*argv, "--dry-run"])
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
                if b.gpus is None and any(x in b.text for x in GPU_ONLY)]
    assert not unmarked, f"blocks naming {' or '.join(GPU_ONLY)} without gpus=N in their fence: {unmarked}"


def test_the_readmes_write_gpu_commands() -> None:
    assert len(COMMANDS) >= 20 and {c.gpus for c in COMMANDS} >= {1, 2, 4}


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_the_gpu_command_dry_runs_as_written(command: GpuCommand, gpu_machine, monkeypatch, capfd) -> None:
    assert command.program == "solver" or (BENCHMARKS / command.program).is_file(), (
        f"{command.program}: not a benchmark or the solver CLI; a GPU command needs a dry run "
        "(solver/commands/dryrun.py)")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", ",".join(str(i) for i in range(command.gpus)))
    argv = argv_of(command, gpu_machine)
    if command.program == "solver" and "kaggle-local" in argv:
        pytest.importorskip("vllm")  # the predictor's check of sampling.extra is vLLM's own (hidden in the fast tier)
    code = run(command.program, argv)
    printed = capfd.readouterr()
    assert code == 0, f"{command.program} {' '.join(argv)}\n{printed.out}\n{printed.err}"
    assert "dry run: " in printed.out and "parsed and checked; nothing started" in printed.out, printed.out
