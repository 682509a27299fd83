"""The bad inputs of docs/bad-input.md, run as a user runs them (``python -m solver`` in a process, from the
repository's root): each ends with exit code 2, one line on stderr, nothing on stdout and nothing written, and the
table there shows exactly that line and code. The table is this file's output: a row that differs fails with the
row as it is now; ``SOLVER_WRITE_BAD_INPUT=1`` writes the table afresh.

The cases without vLLM run in every tier (the GPU presets' checks read the GPU kit's vLLM as data, nothing is
imported); the one vLLM itself refuses (an engine config it cannot build) imports it and is marked slow."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import pytest

from conftest import ROOT, solver_cmd

DOC = ROOT / "docs" / "bad-input.md"
BEGIN, END = "<!-- rows: tests/commands/test_bad_input.py -->", "<!-- end of rows -->"
OUT = "runs/bad-input"  # under the checkout, git-ignored; made afresh by each run of the cases
DATA = "benchmarks/data/aimo3_rehearsal.csv"
GPU = ("--preset", "h100-gptoss", "--model", "/nowhere/gpt-oss-120b")
DAY = ("day", "--gpu", *GPU, "--attempts-file", "/nowhere/slice.jsonl.xz", "--estimate", "--dry-run")
OFFLINE = {"HF_HUB_OFFLINE": "1"}
SPECULATE = json.dumps({"method": "eagle3", "num_speculative_tokens": 3})


@dataclass(frozen=True)
class Case:
    """One bad input: the command's arguments, the environment it adds, and whether vLLM is imported to refuse it."""

    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    slow: bool = False

    @property
    def shown(self) -> str:
        """The command as a user types it.

        >>> Case(("solve", "--set", "a=b c"), {"X": "1"}).shown
        "X=1 solver solve --set 'a=b c'"
        """
        return " ".join([*(f"{k}={v}" for k, v in self.env.items()), "solver", shlex.join(self.args)]).strip()


CASES = (
    Case(()),
    Case(("solve", DATA)),
    Case(("solve", "no-such-file.csv", "--out", f"{OUT}/a")),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--set", "sampling.temprature=1")),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--model", "not-a/real-model-xyz"), OFFLINE),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--preset", "h100-gptoss", "--model", "models/gpt-oss-120b"), OFFLINE),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--preset", "h100-gptoss")),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--preset", "h100-gptoss", "--dry-run")),
    Case(("solve", "--resume", f"{OUT}/torn")),
    Case(("report", f"{OUT}/torn")),
    Case(("kaggle-local", DATA, "--preset", "h100-gptoss", "--out", f"{OUT}/k", "--dry-run")),
    Case((*DAY, "--set", "engine.args.moe_backend=marlinn")),
    Case((*DAY, "--set", "engine.args.kv_cache_dtype=fp9")),
    Case((*DAY, "--set", "engine.args.max_num_seqs=-4")),
    Case((*DAY, "--set", "sampling.extra.min_q=0.1")),
    Case(("day", "--gpu", "--preset", "h100-gptoss", "--attempts-file", "/nowhere/slice.jsonl.xz", "--json",
          f"{OUT}/day.json", "--dry-run")),
    Case(("serve", *GPU, "--dry-run", "--", "--max-num-seqz", "3")),
    Case(("serve", *GPU, "--dry-run", "--", "--speculative-config", SPECULATE)),
    Case(("serve", "--preset", "h100-gptoss", "--dry-run")),
    Case(("solve", DATA, "--out", f"{OUT}/a", "--limit", "1", "--set", "engine.args.max_model_len=100000"),
         slow=True),
)


@dataclass(frozen=True)
class Outcome:
    """What a case left: its exit code, its stderr's lines (a library's warning about its own set-up aside), its
    stdout, and whether it wrote under ``OUT`` beyond the torn run laid there."""

    code: int
    lines: tuple[str, ...]
    stdout: str
    wrote: bool

    def row(self, case: Case) -> str:
        """The table's row: the command, the exit code, the line (``|`` escaped for the table)."""
        line = " / ".join(self.lines).replace("|", "\\|")
        return f"| `{case.shown}` | {self.code} | {line} |"


def lay_torn_run() -> None:
    """``OUT/torn``: a run killed while writing its first record (its config saved, its log one torn line)."""
    from solver.config import Config
    from solver.runlog import LOG_NAME, RunLog

    shutil.rmtree(ROOT / OUT, ignore_errors=True)
    RunLog.create(ROOT / OUT / "torn", Config()).close()
    (ROOT / OUT / "torn" / LOG_NAME).write_bytes(b'{"type": "problem", "schema": 1, "id": "1", "pro')


def run_case(case: Case) -> Outcome:
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    done = subprocess.run(solver_cmd(*case.args), cwd=ROOT, env={**env, **case.env}, capture_output=True, text=True,
                          timeout=300)
    lines = tuple(line for line in done.stderr.splitlines() if line.strip() and "Triton" not in line)
    wrote = sorted(p.name for p in (ROOT / OUT).iterdir()) != ["torn"]
    return Outcome(done.returncode, lines, done.stdout, wrote)


def documented() -> dict[str, str]:
    """The table's rows in docs/bad-input.md, by their command cell."""
    text = DOC.read_text()
    rows = text[text.index(BEGIN) + len(BEGIN):text.index(END)].strip().splitlines()[2:]  # past the header
    rows = [row for row in rows if row.startswith("| `")]
    return {re.match(r"\| `(.*?)` \|", row).group(1): row for row in rows}  # type: ignore[union-attr]


def write_rows(rows: Mapping[str, str]) -> None:
    """The table written with ``rows`` (by command) in place of theirs, the other rows kept, in ``CASES``' order."""
    text = DOC.read_text()
    merged = {**documented(), **rows}
    table = "\n".join(["| command | exit | what it prints (stderr) |", "|---|---|---|",
                       *(merged[c.shown] for c in CASES if c.shown in merged)])
    DOC.write_text(text[:text.index(BEGIN) + len(BEGIN)] + "\n" + table + "\n" + text[text.index(END):])


def check(cases: tuple[Case, ...]) -> None:
    lay_torn_run()
    with ThreadPoolExecutor(max_workers=2) as pool:
        outcomes = list(pool.map(run_case, cases))
    rows = [o.row(c) for c, o in zip(cases, outcomes)]
    if os.environ.get("SOLVER_WRITE_BAD_INPUT"):
        write_rows({c.shown: row for c, row in zip(cases, rows)})
    for case, outcome, row in zip(cases, outcomes, rows):
        assert outcome.code == 2 and len(outcome.lines) == 1, row
        assert outcome.stdout == "" and not outcome.wrote, (row, outcome.stdout)
    table = documented()
    assert set(table) == {c.shown for c in CASES}, "docs/bad-input.md's rows are not this file's cases"
    for case, row in zip(cases, rows):
        assert table[case.shown] == row, f"docs/bad-input.md's row is stale; now:\n{row}"


def test_each_bad_input_is_one_line_and_exit_2_as_the_table_says() -> None:
    check(tuple(c for c in CASES if not c.slow))


@pytest.mark.slow
def test_an_engine_config_vllm_refuses_is_its_reason_in_one_line() -> None:
    pytest.importorskip("vllm")
    check(tuple(c for c in CASES if c.slow))


def test_every_option_has_a_line_of_help_and_the_required_pair_shows_as_required() -> None:
    """Each option of every (sub)command says what it is (a deprecated alias hidden from the help aside), and
    ``solve``'s usage shows ``--out`` / ``--resume`` as the required pair under the names its error uses."""
    import argparse

    from solver.cli import build_parser

    def bare(parser: argparse.ArgumentParser, path: str) -> list[str]:
        out = []
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out += [name for sub, p in action.choices.items() for name in bare(p, f"{path} {sub}")]
            elif not action.help:
                out.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
        return out

    assert bare(build_parser(), "solver") == []
    shown = subprocess.run(solver_cmd("solve", "--help"), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "(--out RUN_DIR | --resume RUN_DIR)" in " ".join(shown.stdout.split())
