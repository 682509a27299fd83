"""benchmarks/gpu_sitting.md, the plan of the GPU calls: its table fits the device's limits (each call under 10
minutes, each sitting within 30), each call's carries are the kit's, every result file it names is written by one
of its commands, and the pure-decode probe it calls reads its options as planned. The commands themselves are
dry-run as written by tests/test_readme_gpu_commands.py (the plan is one of its documents)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "benchmarks" / "gpu_sitting.md"
CALL_LIMIT_S, SITTING_LIMIT_S = 600, 1800
CARRIES = {".gpu/1-vllm", ".gpu/2-deps", ".gpu/2-kernels", ".gpu/3-polars", ".gpu/4-moe", ".gpu/day"}


def calls() -> list[dict[str, str]]:
    rows = []
    for line in PLAN.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and cells[0].isdigit() and cells[1].isdigit():
            rows.append(dict(zip(("sitting", "call", "what", "carry", "seconds", "writes"), cells)))
    return rows


def totals() -> dict[str, int]:
    found = {}
    for line in PLAN.read_text().splitlines():
        total = re.match(r"\|\s*\|\s*\|\s*\*\*sitting (\d+)\*\*\s*\|\s*\|\s*\*\*(\d+)\*\*", line)
        if total:
            found[total.group(1)] = int(total.group(2))
    return found


def test_each_call_fits_a_call_and_each_sitting_fits_its_device_time():
    rows = calls()
    assert len(rows) >= 10 and {r["sitting"] for r in rows} == set(totals())
    for row in rows:
        assert 0 < int(row["seconds"]) < CALL_LIMIT_S, row
    for sitting, total in totals().items():
        assert total == sum(int(r["seconds"]) for r in rows if r["sitting"] == sitting)
        assert total <= SITTING_LIMIT_S, (sitting, total)


def test_carries_are_the_kit_s_and_each_sitting_installs_the_kit_first():
    for row in calls():
        named = set(re.findall(r"`([^`]+)`", row["carry"]))
        assert named <= CARRIES, row
    for sitting in totals():
        first = [r for r in calls() if r["sitting"] == sitting][:2]
        assert [r["carry"] for r in first] == ["`.gpu/1-vllm`", "`.gpu/2-deps`"]


def test_every_result_file_the_table_names_is_written_by_a_command_of_the_plan():
    text = PLAN.read_text()
    blocks = "\n".join(re.findall(r"```bash gpus=1\n(.*?)```", text, re.S))
    for row in calls():
        for name in re.findall(r"`\$OUT/([\w.-]+)`", row["writes"]):
            assert f"$OUT/{name}" in blocks, name


def test_the_decode_probe_refuses_bad_options_in_one_line():
    for args, message in ((["--decode-seqs", "0"], "sizes must be >= 1"),
                          (["--decode-seqs", "x"], "--decode-seqs: comma-separated"),
                          (["--contexts", "2048", "--decode", "64", "--decode-seqs", "1"], None)):
        done = subprocess.run([sys.executable, "benchmarks/probes.py", "--probes", "decode", "--dry-run", *args],
                              cwd=ROOT, capture_output=True, text=True, timeout=120)
        if message is None:  # the tiny engine's 2,048 tokens: a 2,048-token prompt and its decode do not fit
            assert done.returncode == 2 and "max_model_len is 2048" in done.stderr
        else:
            assert done.returncode == 2 and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr


def test_the_plan_s_commands_are_among_those_dry_run_as_written():
    from test_readme_gpu_commands import COMMANDS

    planned = [c for c in COMMANDS if c.doc == "benchmarks/gpu_sitting.md"]
    assert {c.program for c in planned} == {"day.py", "moe_numerics.py", "probes.py", "roofline.py", "speculation.py",
                                            "solver"}
    assert all(c.gpus == 1 for c in planned) and len(planned) == 13
    # The day runs uncapped: no per-attempt token cap on any of them.
    assert all("--attempt-tokens" not in c.argv for c in planned if c.program == "day.py")
