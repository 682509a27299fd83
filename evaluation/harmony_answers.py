"""Where gpt-oss puts its answers, measured on real attempts recorded as harmony token traces.

    python evaluation/harmony_answers.py [TRACES] [--preset h100-gptoss]

TRACES defaults to the recorded gpt-oss-120b attempts beside the checkout (``DEFAULT``), which the repository does not
ship: pass your own file of harmony token traces. Each attempt is driven through the preset's harmony dialogue as the loop drives it (tool outputs read back
from the recording) and three things are printed:

1. The first-answer watch against the recording harness's cut: each request's ids are fed to ``Dialogue.watch``
   one token at a time and in pieces of 16 (as the replay engine streams them); where it first fires is compared
   with where the harness stopped the stream (the end of the attempt's last request).
2. Answers under the old rule (the final channel only) and the new one (the final channel's answer, else a boxed
   answer in any channel): attempts with a boxed answer, attempts whose answer (the voter's pick: boxed, else
   phrase, else a code output) is right, and problems whose majority vote over all attempts is right.
3. Tokens the any-channel cut saves, defined as what a final-channel-only watch would at least add: an attempt
   that boxed its answer in the analysis channel would still have to write a final message. Its length is taken
   from the attempts that did answer in the final channel (``<|end|><|start|>assistant<|channel|>final<|message|>``
   and the text up to the token closing the box); the saving is that median times the analysis-answered attempts,
   a lower bound (the rest of the analysis message after its box is not counted).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT.parent / "shared" / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
FINAL_MARKER = "<|channel|>final<|message|>"
SWITCH = 3  # <|end|><|start|>assistant: the tokens that close an analysis message and open the final one


def first_fire(dialect, problem, requests, piece: int) -> tuple[int, int] | None:
    """``(request, ids streamed)`` where the first-answer watch first fired, feeding ``piece`` ids at a time;
    None when it never did. A fresh dialogue per request: the loop's watch starts anew with each request."""
    for k, request in enumerate(requests):
        watcher = dialect.start(problem)
        for start in range(0, len(request.generated), piece):
            chunk = tuple(request.generated[start: start + piece])
            if watcher.watch("", chunk):
                return k, start + len(chunk)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("traces", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--preset", default="h100-gptoss")
    args = parser.parse_args(argv)
    if not args.traces.is_file():
        print(f"no traces at {args.traces}", file=sys.stderr)
        return 2
    sys.path.insert(0, str(ROOT))
    from solver.config import load_config
    from solver.core.answers import code_answer, extract_answers, is_correct
    from solver.core.voting import make_voter, text_answer
    from solver.dialects import TurnOutput, make_dialect
    from solver.dialects import OutputStyle, execution_from_shown
    from solver.replay import read_attempts
    from solver.types import Answer, Ballot, Problem, Repetition

    started = time.monotonic()
    config = load_config(args.preset)
    rules, style = config.answers, OutputStyle.from_config(config.prompt)
    voter = make_voter(config.vote, rules)
    attempts = read_attempts(args.traces)
    fires: dict[int, Counter[str]] = {1: Counter(), 16: Counter()}
    elsewhere: list[str] = []
    picks: dict[str, dict[str, list[Answer | None]]] = {"old": {}, "new": {}}
    boxed: Counter[str] = Counter()
    where: Counter[str] = Counter()
    final_lengths: list[int] = []
    for attempt in attempts:
        texts = {r.follow_up for r in attempt.requests if r.follow_up is not None}
        dialect = make_dialect(config.replace({"prompt.follow_up": texts.pop()}) if texts else config, None)
        problem = Problem(attempt.problem_id, attempt.problem)
        last = len(attempt.requests) - 1
        cut_at = (last, len(attempt.requests[last].generated))  # the harness stopped the stream here
        for piece, counter in fires.items():
            fired = first_fire(dialect, problem, attempt.requests, piece)
            label = ("never" if fired is None else "at the cut" if fired == cut_at else
                     "earlier in the last request" if fired[0] == last else "in an earlier request")
            counter[label] += 1
            if label != "at the cut":
                elsewhere.append(f"{attempt.source}: {label} ({fired}, the cut {cut_at}, pieces of {piece})")
        dialogue = dialect.start(problem)
        found: dict[str, list[Answer]] = {"old": [], "new": []}
        for k, request in enumerate(attempt.requests):
            ids, cut = request.generated, request.end == "cut"
            out = TurnOutput("", ids, "stop", stop_token=None if cut else ids[-1], ended_by_loop=cut)
            reading = dialogue.read(out)
            found["new"] += extract_answers(reading.answer_text, rules)
            finals = [m for m in dialogue.parse(list(ids)) if m.channel == "final"]
            final = "\n".join("".join(getattr(p, "text", "") for p in m.content) for m in finals)
            if not finals and FINAL_MARKER in reading.text:  # the final message the harness cut at its box
                final = reading.text[reading.text.rfind(FINAL_MARKER) + len(FINAL_MARKER):]
            found["old"] += extract_answers(final, rules)
            if k == last:
                if FINAL_MARKER in reading.text:
                    where["final"] += 1
                    marker = dialect.encoding.encode(FINAL_MARKER, allowed_special="all")
                    at = max(i for i in range(len(ids)) if list(ids[i: i + len(marker)]) == marker)
                    final_lengths.append(len(ids) - at + SWITCH)
                else:
                    where["analysis"] += 1
                break
            if request.follow_up is not None and not reading.goes_on:  # a box the harness did not take
                reading = replace(reading, goes_on=True)
            execution = None
            if request.tool_output is not None and reading.call is not None:
                execution = execution_from_shown(reading.call, request.tool_output, style)
                answer = code_answer(execution.stdout, rules) if execution.status == "ok" else None
                if answer is not None:
                    found["old"].append(answer)
                    found["new"].append(answer)
            dialogue.reply(out, reading, execution)
        for rule in ("old", "new"):
            rep = Repetition(attempt.problem_id, 0, 0, "done", (), tuple(found[rule]), 0.0, 0.0)
            picks[rule].setdefault(attempt.problem_id, []).append(text_answer(rep))
            boxed[rule] += any(a.source == "boxed" for a in found[rule])
    reference = {a.problem_id: a.answer for a in attempts}

    def right(answer: Answer | None, pid: str) -> bool:
        return answer is not None and reference[pid] is not None and is_correct(answer.value, reference[pid], rules)

    print(f"{len(attempts)} attempts of {len(reference)} problems; the last request holds its answer in the final "
          f"channel on {where['final']}, in the analysis channel on {where['analysis']}")
    print("\n1. first-answer watch vs the harness's cut")
    for piece, counter in fires.items():
        print(f"   pieces of {piece:>2} ids: " + ", ".join(f"{k} {v}" for k, v in sorted(counter.items())))
    for line in elsewhere:
        print(f"   {line}")
    print("\n2. answers: old rule (final channel only) vs new (final channel, else a box in any channel)")
    for rule in ("old", "new"):
        attempts_right = sum(right(a, pid) for pid, answers in picks[rule].items() for a in answers)
        problems_right = 0
        for pid, answers in picks[rule].items():
            winner = voter.winner([Ballot(a.value) if a is not None else None for a in answers])
            problems_right += winner is not None and is_correct(winner, reference[pid], rules)
        sources = Counter(a.source if a is not None else "none" for answers in picks[rule].values() for a in answers)
        right_by = Counter(a.source for pid, answers in picks[rule].items() for a in answers if right(a, pid))
        by_source = ", ".join(f"{k} {v} (right {right_by[k]})" for k, v in sorted(sources.items()))
        print(f"   {rule}: {boxed[rule]} attempts with a boxed answer; picked answers by source: {by_source}; right "
              f"in {attempts_right} of {len(attempts)} attempts; majority over all attempts right on {problems_right}"
              f" of {len(picks[rule])} problems")
    print("\n3. tokens the any-channel cut saves (lower bound)")
    median = statistics.median(final_lengths)
    deciles = statistics.quantiles(final_lengths, n=10)
    generated = sum(a.generated_tokens for a in attempts)
    print(f"   a final message up to its box: median {median:g} tokens (p10 {deciles[0]:g}, p90 {deciles[-1]:g}) over "
          f"{len(final_lengths)} final-channel answers")
    print(f"   saved on {where['analysis']} analysis-channel answers: >= {median * where['analysis']:,.0f} tokens "
          f"({100 * median * where['analysis'] / generated:.2f} % of {generated:,} generated)")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
