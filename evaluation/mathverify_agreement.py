"""Agreement with Math-Verify's own test tables, on the cases whose gold is an integer.

    python evaluation/mathverify_agreement.py MATH_VERIFY [--all]

MATH_VERIFY is a checkout of github.com/huggingface/Math-Verify: a work tree (with ``tests/``) or a bare git
directory (read with ``git show HEAD:tests/...``). Its tests are read at run time and never copied here.

Every ``@pytest.mark.parametrize`` table in its ``tests/test_*.py`` with a ``gold`` and a ``pred`` column is a
case; the verdict it asserts (``expected`` or ``result``) is Math-Verify's. A case counts when Math-Verify reads
its gold as an integer: ``math_verify.parse(gold)`` gives a sympy Integer from a complete expression (its matched
text has balanced braces; ``$1 - \\frac{1}{\\mathrm{e}}$``, read as ``1`` from ``1 - \\frac{1}{``, is not an
integer gold). Our verdict is what a run would say: the answer the repetition votes with (extraction, then
``solver.core.voting.text_answer``) graded against that integer by ``is_correct``, under integer rules with a
range wide enough for every gold. Prints every disagreement (every case with ``--all``) and the agreement. The
script measures the ``solver`` it imports (it prints which): set ``PYTHONPATH`` to measure another version.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import solver
from solver.config import AnswerConfig
from solver.core.answers import extract_answers, is_correct
from solver.core.voting import text_answer
from solver.types import Repetition

# Every gold of the tables fits (the largest is 11,111,111,100); negative golds occur ("-5").
RULES = AnswerConfig(low=-(10**15), high=10**15)


@dataclass(frozen=True)
class Case:
    test: str  # file::function[index in its table]
    gold: str
    pred: str
    verdict: bool  # Math-Verify's, as its test asserts it


def test_sources(checkout: Path) -> dict[str, str]:
    """The text of every ``tests/test_*.py`` of a Math-Verify checkout, work tree or bare git directory."""
    if (checkout / "tests").is_dir():
        return {p.name: p.read_text() for p in sorted((checkout / "tests").glob("test_*.py"))}
    names = subprocess.run(["git", "--git-dir", str(checkout), "ls-tree", "--name-only", "HEAD", "tests/"],
                           capture_output=True, text=True, check=True).stdout.split()
    return {Path(n).name: subprocess.run(["git", "--git-dir", str(checkout), "show", f"HEAD:{n}"],
                                         capture_output=True, text=True, check=True).stdout
            for n in names if Path(n).name.startswith("test_") and n.endswith(".py")}


def cases(sources: dict[str, str]) -> tuple[list[Case], list[str]]:
    """Every gold/pred row of the parametrized tables, and the tables that are not plain literals (skipped)."""
    found, skipped = [], []
    for name, text in sources.items():
        for fn in ast.parse(text).body:
            if not isinstance(fn, ast.FunctionDef):
                continue
            for deco in fn.decorator_list:
                if not (isinstance(deco, ast.Call) and getattr(deco.func, "attr", "") == "parametrize"):
                    continue
                columns = [c.strip() for c in ast.literal_eval(deco.args[0]).split(",")]
                if "gold" not in columns or "pred" not in columns:
                    continue
                try:
                    rows = ast.literal_eval(deco.args[1])
                except ValueError:
                    skipped.append(f"{name}::{fn.name}")
                    continue
                verdict = "expected" if "expected" in columns else "result"
                for i, row in enumerate(rows):
                    values = dict(zip(columns, row))
                    found.append(Case(f"{name}::{fn.name}[{i}]", values["gold"], values["pred"],
                                      bool(values[verdict])))
    return found, skipped


def integer_gold(gold: str) -> int | None:
    """The integer Math-Verify reads the gold as, when it reads a whole expression as one."""
    import math_verify
    import sympy

    parsed = math_verify.parse(gold)
    if len(parsed) < 2 or not isinstance(parsed[0], sympy.Integer):
        return None
    text = str(parsed[1])
    return int(parsed[0]) if text.count("{") == text.count("}") else None


def our_answer(pred: str) -> str | None:
    """The value a repetition whose text is ``pred`` votes with."""
    rep = Repetition("case", 0, 0, "done", (), extract_answers(pred, RULES), 0.0, 0.0)
    answer = text_answer(rep)
    return answer.value if answer is not None else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkout", type=Path, help="a Math-Verify checkout (work tree or bare git directory)")
    parser.add_argument("--all", action="store_true", help="print every case, not only the disagreements")
    args = parser.parse_args()
    if not args.checkout.exists():
        print(f"mathverify_agreement: no checkout at {args.checkout}", file=sys.stderr)
        return 2
    try:
        found, skipped = cases(test_sources(args.checkout))
    except (subprocess.CalledProcessError, OSError, SyntaxError) as exc:
        print(f"mathverify_agreement: cannot read the tests of {args.checkout}: {exc}", file=sys.stderr)
        return 2
    agree = total = 0
    for case in found:
        gold = integer_gold(case.gold)
        if gold is None:
            continue
        ours = our_answer(case.pred)
        verdict = ours is not None and is_correct(ours, str(gold), RULES)
        total += 1
        agree += verdict == case.verdict
        if args.all or verdict != case.verdict:
            mark = "agree   " if verdict == case.verdict else "DISAGREE"
            print(f"{mark} {case.test}: gold {gold}, ours {ours}, Math-Verify says {int(case.verdict)}; "
                  f"pred ...{case.pred[-80:]!r}")
    tables = len({c.test.split("[")[0] for c in found})
    note = f" (tables not written as plain literals, skipped: {', '.join(skipped)})" if skipped else ""
    print(f"solver from {Path(solver.__file__).parent}")
    print(f"{len(found)} cases in {tables} tables{note}; {total} with an integer gold")
    print(f"agreement: {agree} of {total} ({100 * agree / max(total, 1):.1f} %)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
