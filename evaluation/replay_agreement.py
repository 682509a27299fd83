"""How far a replay agrees with the run it replayed.

    python evaluation/replay_agreement.py RECORDED_RUN REPLAYED_RUN [--preset h100-gptoss]

Repetition ``i`` of a problem in the replay is the ``i``-th finished repetition of the recording (the replay engine's
rule). For each pair: the same generated ids turn by turn (the first-answer watch cut where the recording ended),
the same tool outputs as the model is shown them (``describe_execution`` in the preset's style), the same answer
(the voter's pick); and per problem, the submitted answer of each run against the reference. Repetitions the replay
asked for beyond the recording (``error``: nothing recorded) are counted apart.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recorded", type=Path)
    parser.add_argument("replayed", type=Path)
    parser.add_argument("--preset", default="h100-gptoss")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from solver.config import load_config
    from solver.core.voting import text_answer
    from solver.dialects import OutputStyle, describe_execution
    from solver.runlog import read_log

    style = OutputStyle.from_config(load_config(args.preset).prompt)
    recorded, replayed = read_log(args.recorded), read_log(args.replayed)
    old_reps, new_reps = recorded.finished(), replayed.finished()
    counts: Counter[str] = Counter()
    differ: list[str] = []
    for pid, reps in new_reps.items():
        for new in reps:
            if new.status == "error" and new.index >= len(old_reps.get(pid, [])):
                counts["beyond the recording"] += 1
                continue
            old = old_reps[pid][new.index]
            counts["compared"] += 1
            same_ids = [t.token_ids for t in new.turns] == [t.token_ids for t in old.turns]
            counts["same ids"] += same_ids
            if not same_ids:
                tokens = [sum(t.generated_tokens for t in rep.turns) for rep in (new, old)]
                differ.append(f"{pid} #{new.index}: other ids ({new.status}, {tokens[0]} of {tokens[1]} tokens, "
                              f"{len(new.turns)} of {len(old.turns)} turns)")
            counts["same status"] += new.status == old.status
            shown = [(describe_execution(a.execution, style), describe_execution(b.execution, style))
                     for a, b in zip(old.turns, new.turns) if a.execution is not None and b.execution is not None]
            counts["calls"] += len(shown)
            counts["same output"] += sum(a == b for a, b in shown)
            a, b = text_answer(old), text_answer(new)
            same = (a.value if a else None) == (b.value if b else None)
            counts["same answer"] += same
            if not same:
                differ.append(f"{pid} #{new.index}: answer {a.value if a else None} -> {b.value if b else None} "
                              f"({new.status}, {len(new.turns)} of {len(old.turns)} turns)")
    reference = {p.id: p.answer for p in recorded.problems}
    results = {r.problem_id: r for r in replayed.results}
    print(f"{counts['compared']} repetitions compared ({counts['beyond the recording']} asked beyond the recording)")
    for key in ("same ids", "same status", "same answer"):
        print(f"  {key}: {counts[key]} of {counts['compared']}")
    print(f"  tool calls shown the same output: {counts['same output']} of {counts['calls']}")
    for line in differ:
        print(f"  {line}")
    if results:
        right = sum(r.correct is True for r in results.values())
        print(f"problems answered right by the replay: {right} of {len(reference)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
