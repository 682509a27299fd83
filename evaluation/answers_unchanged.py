"""The answers extraction gives to real model text and real code output, by id, to compare two versions.

    python evaluation/answers_unchanged.py --out AFTER.json [--against BEFORE.json]
                                           [--attempts FILE] [--pot FILE] [--pot-outputs FILE]

Reads, at run time (nothing of them is copied into the project):

- the recorded gpt-oss-120b attempts (default ``ATTEMPTS``, beside the checkout, not shipped: ``--attempts`` for your own): every
  analysis and final message of every request, decoded with the harmony encoding, through ``extract_answers``
  (gpt-oss answers in either channel), and every recorded tool output through ``code_answer``;
- PoT AQuA (``benchmarks/data/pot_aqua_dev.jsonl.gz``): every program's text through ``extract_answers`` (what
  ``solver import-samples`` does for a sample without a predicted answer), and the output of every program run in
  the solver's sandbox (with ``from sympy import *`` and a ``solve_it`` before it, as its harness had) and
  ``print(ans)`` after it (PoT programs leave their result in ``ans``) through
  ``code_answer``. The outputs are kept in ``--pot-outputs`` (default ``/tmp/pot_aqua_outputs.json``), so a second
  version reads the same outputs instead of running the programs again.

Writes ``{id: [[value, source], ...]}`` to ``--out``; with ``--against`` prints every id whose answers differ
(with the end of its text) and a count per corpus. Run it once on each version (``PYTHONPATH`` pointing at each)
to see what a change of the extraction changes (the script reads the version it is given; it prints which).
Integer rules, the default range (0 to 99999).
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
from pathlib import Path

from solver.files import atomic_write

ROOT = Path(__file__).resolve().parents[1]
ATTEMPTS = ROOT.parent / "shared" / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
POT = ROOT / "benchmarks" / "data" / "pot_aqua_dev.jsonl.gz"

def attempt_answers(path: Path) -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """Answers of every message and tool output of every real attempt, and the text each id was read from."""
    from solver.core.answers import code_answer, extract_answers
    from solver.config import AnswerConfig
    from openai_harmony import Role

    from solver.dialects import load_encoding, message_text
    from solver.replay import read_attempts

    rules, enc = AnswerConfig(), load_encoding()
    found: dict[str, list[list[str]]] = {}
    texts: dict[str, str] = {}
    for i, attempt in enumerate(read_attempts(path)):
        for r, request in enumerate(attempt.requests):
            messages = enc.parse_messages_from_completion_tokens(list(request.generated), Role.ASSISTANT,
                                                                 strict=False)
            for m, message in enumerate(messages):
                channel, text = message.channel, message_text(message)
                if message.recipient is not None or channel not in ("analysis", "final"):
                    continue
                key = f"attempt {i} ({attempt.problem_id}) request {r} message {m} {channel}"
                found[key] = [[a.value, a.source] for a in extract_answers(text, rules)]
                texts[key] = text
            if request.tool_output is not None:
                key = f"attempt {i} ({attempt.problem_id}) request {r} tool output"
                answer = code_answer(request.tool_output, rules)
                found[key] = [[answer.value, answer.source]] if answer is not None else []
                texts[key] = request.tool_output
    return found, texts


# PoT programs call sympy names bare and a ``solve_it(equations, unknowns)`` their harness defined: a dict of one
# solution. Written here from that description; the programs run with it before them.
_POT_PRELUDE = """\
from sympy import *


def solve_it(equations, unknowns):
    solutions = solve(equations, unknowns, dict=True)
    return solutions[0] if solutions else {}
"""


async def _run_programs(programs: dict[str, str]) -> dict[str, str]:
    from solver.config import SandboxConfig
    from solver.sandbox.pool import ProcessPoolSandbox

    pool = ProcessPoolSandbox(SandboxConfig(workers=2))
    try:
        runs = await asyncio.gather(*(pool.run(f"{_POT_PRELUDE}{code}\nprint(ans)\n") for code in programs.values()))
    finally:
        await pool.close()
    return {key: run.stdout if run.status == "ok" else "" for key, run in zip(programs, runs)}


def pot_answers(path: Path, outputs_path: Path) -> tuple[dict[str, list[list[str]]], dict[str, str]]:
    """Answers of every PoT AQuA program text and of its output (run once, then read from ``outputs_path``)."""
    from solver.core.answers import code_answer, extract_answers
    from solver.config import AnswerConfig

    rules = AnswerConfig()
    with gzip.open(path, "rt") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    programs = {f"{s['problem_id']} sample {s['sample']}": s["generation"] for s in samples}
    if outputs_path.is_file():
        outputs = json.loads(outputs_path.read_text())
    else:
        outputs = asyncio.run(_run_programs(programs))
        atomic_write(outputs_path, json.dumps(outputs))
    found: dict[str, list[list[str]]] = {}
    texts: dict[str, str] = {}
    for key, program in programs.items():
        found[f"{key} program"] = [[a.value, a.source] for a in extract_answers(program, rules)]
        texts[f"{key} program"] = program
        answer = code_answer(outputs[key], rules)
        found[f"{key} output"] = [[answer.value, answer.source]] if answer is not None else []
        texts[f"{key} output"] = outputs[key]
    return found, texts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True, help="where to write the answers by id (JSON)")
    parser.add_argument("--against", type=Path, help="answers of another version, written by --out")
    parser.add_argument("--attempts", type=Path, default=ATTEMPTS, help="the real attempts (JSON lines, .xz)")
    parser.add_argument("--pot", type=Path, default=POT, help="the PoT AQuA samples (JSON lines, .gz)")
    parser.add_argument("--pot-outputs", type=Path, default=Path("/tmp/pot_aqua_outputs.json"),
                        help="the PoT programs' outputs: read when present, else run and written")
    args = parser.parse_args()
    for path in (args.attempts, args.pot) + ((args.against,) if args.against else ()):
        if not path.is_file():
            print(f"answers_unchanged: no file at {path}", file=sys.stderr)
            return 2
    before = json.loads(args.against.read_text()) if args.against else None

    attempts, attempt_texts = attempt_answers(args.attempts)
    pot, pot_texts = pot_answers(args.pot, args.pot_outputs)
    found, texts = {**attempts, **pot}, {**attempt_texts, **pot_texts}
    atomic_write(args.out, json.dumps(found, indent=0))
    with_answer = sum(bool(v) for v in found.values())
    import solver

    print(f"solver from {Path(solver.__file__).parent}")
    print(f"{len(attempts)} attempt texts and tool outputs, {len(pot)} PoT programs and outputs; "
          f"{with_answer} with an answer; written to {args.out}")
    if before is None:
        return 0
    changed = {corpus: 0 for corpus in ("attempt", "pot")}
    for key in sorted(set(found) | set(before)):
        if found.get(key) != before.get(key):
            changed["attempt" if key.startswith("attempt") else "pot"] += 1
            print(f"CHANGED {key}: {before.get(key)} -> {found.get(key)}; text ...{texts.get(key, '')[-160:]!r}")
    print(f"changed: {changed['attempt']} of {len(attempts)} attempt texts and tool outputs, "
          f"{changed['pot']} of {len(pot)} PoT programs and outputs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
