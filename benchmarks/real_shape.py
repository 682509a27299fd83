"""The real shape on the engine: recorded gpt-oss-120b attempts replayed through four contenders.

One problem at a time, K attempts at once (``engine.py --workload real``):

  (a)  one request per attempt with the attempt's total decoded tokens: no turns, no tools (the ceiling);
  (t)  the attempt's turns through the engine with no solver code: a request per turn on vLLM's ``AsyncLLM``,
       each prompt the grown context (what the engine generated, the scripted ending, the appended ids the plan
       holds), the tool's seconds waited between turns;
  (b1) the pipeline as on Kaggle: ``ProblemSolver`` with the harmony dialect and the preset's settings (stateful
       sandbox sessions, the recorded tool messages through ``solver.measure.recorded_calls``), the in-process engine;
  (s)  the same pipeline through ``--engine openai`` against a vLLM OpenAI server started as ``solver serve`` does
       (token-id prompts, streaming, a request per turn).

Every contender decodes exactly the plan's tokens (``solver.measure.workload``: each request the recorded count,
drawn among plain words), so the work is identical; (t), (b1) and (s) also send identical prompts. Printed per
contender: tokens/s, seconds per problem, the prefix-cache hit rate (the engine's counters, and per request),
preemptions, the KV cache peak and requests running (``Sampler``); then the ratios (b1)/(t) (the solver's cost on
top of the engine's turns), (b1)/(s) (in-process vs server) and (t)/(a) (the engine's own cost of turns). ``--json``
writes each contender's per-request timeline and metrics series (``solver.measure.request_timeline``). The flags are
``solver.measure.shape``'s (``add_shape_arguments``, checked once by ``shape_options``), the plan and the run its
``real_shape``, the contenders ``solver.measure.contenders``'.

    python benchmarks/engine.py --workload real --attempts 2 --attempt-tokens 300     # CPU, tiny harmony model
    python benchmarks/engine.py --workload real --gpu --model PATH --attempt-tokens 6000 --json out.json
    python benchmarks/real_shape.py --gpu --model PATH --dry-run     # the same options: parse, plan, start nothing
"""

from __future__ import annotations

import argparse
import sys

from solver.errors import BadInput
from solver.measure.shape import add_shape_arguments, real_shape, SHAPE_DESCRIPTION, shape_options_of, SHAPE_PROG
from solver.dryrun import DryRun


def main(argv: list[str] | None = None) -> int:
    given = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog=SHAPE_PROG, description=SHAPE_DESCRIPTION)
    add_shape_arguments(parser)
    args = parser.parse_args(given)
    dry = DryRun(SHAPE_PROG) if args.dry_run else None
    try:  # the flags checked once, before anything heavy starts
        options = shape_options_of(vars(args), dry)
    except BadInput as exc:
        print(f"{SHAPE_PROG}: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    return real_shape(options, dry, given)


if __name__ == "__main__":
    sys.exit(main())
