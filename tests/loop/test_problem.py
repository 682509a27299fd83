"""The problem solver: what a finished repetition votes with, where its record is written, and how many
repetitions are in flight (control flow: scripted engine and sandbox doubles)."""

from __future__ import annotations

import asyncio
import threading

from doubles import ScriptedEngine, ScriptedSandbox, printed

from solver.config import load_config
from solver.loop.problem import ProblemSolver
from solver.types import Problem, Repetition

PROBLEM = Problem("p1", "How many pairs?", answer="8")


def test_scripted_engine_length_cut_repetition_does_not_vote_its_last_phrase():
    # The request is cut by max_tokens right after a phrase in the middle of the reasoning.
    words = "Let us count. So far the answer is 7 and now we check the remaining cases one by one".split()
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 9, "sampling.max_total_tokens": 9,
                                         "sampling.max_turns": 1, "solve.reps": 2, "solve.workers": 2,
                                         "stop.stoppers": ["max_reps"]})
    engine = ScriptedEngine(lambda req: " ".join(words))
    logged: list[Repetition] = []
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("1")), on_repetition=logged.append)
    result = asyncio.run(solver.solve(PROBLEM))
    assert [r.status for r in logged] == ["length", "length"]
    assert all(r.text.endswith("the answer is 7") for r in logged)
    assert result.votes == {} and result.answer == cfg.answers.default
    assert all(not any(a.source == "phrase" for a in r.answers) for r in logged)  # the log says the same


def test_scripted_engine_finished_repetition_votes_its_concluding_phrase():
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 50, "sampling.max_turns": 1, "solve.reps": 1,
                                         "solve.workers": 1, "stop.stoppers": ["max_reps"]})
    engine = ScriptedEngine(lambda req: "Counting the pairs, the answer is 8.")
    result = asyncio.run(ProblemSolver(cfg, engine, ScriptedSandbox(printed("1"))).solve(PROBLEM))
    assert result.votes == {"8": 1.0} and result.correct is True


def test_scripted_engine_records_are_written_off_the_event_loop_while_it_keeps_running():
    # A record stands for the run log's write + fsync. It waits for a signal only the event loop can give: on
    # the loop's own thread it would wait in vain (and stall every stream meanwhile).
    cfg = load_config("tiny", overrides={"sampling.max_tokens": 50, "sampling.max_turns": 1, "solve.reps": 2,
                                         "solve.workers": 2, "stop.stoppers": ["max_reps"]})
    loop_ran = threading.Event()
    seen: list[tuple[bool, bool]] = []
    loops: list[asyncio.AbstractEventLoop] = []

    def record(rep: Repetition) -> None:
        loops[0].call_soon_threadsafe(loop_ran.set)
        seen.append((threading.current_thread() is threading.main_thread(), loop_ran.wait(5)))
        loop_ran.clear()

    async def main() -> None:
        loops.append(asyncio.get_running_loop())
        engine = ScriptedEngine(lambda req: "so \\boxed{8}")
        await ProblemSolver(cfg, engine, ScriptedSandbox(printed("1")), on_repetition=record).solve(PROBLEM)

    asyncio.run(main())
    assert seen == [(False, True), (False, True)]


class _PeakEngine(ScriptedEngine):
    """The scripted engine double, also counting the most requests it ever had open at once."""

    peak: int = 0

    async def stream(self, request):  # type: ignore[no-untyped-def]
        async for delta in super().stream(request):
            self.peak = max(self.peak, self.open_streams)
            yield delta


def _solve_two_at_once(cfg, engine, sandbox):  # type: ignore[no-untyped-def]
    solver = ProblemSolver(cfg, engine, sandbox)

    async def both():  # type: ignore[no-untyped-def]
        return await asyncio.gather(solver.solve(PROBLEM), solver.solve(Problem("p2", "Again?", answer="8")))

    return asyncio.run(both())


AUTO = {"sampling.max_tokens": 200, "sampling.max_turns": 2, "solve.reps": 5, "solve.workers": 0,
        "engine.args.max_num_seqs": 3, "stop.stoppers": ["max_reps"]}


def test_scripted_engine_auto_workers_cap_the_engine_batch_across_parallel_problems():
    # max_num_seqs = 3: two problems at once must keep at most 3 requests in the engine in all, not 3 each.
    engine = _PeakEngine(lambda req: "word " * 10 + "so \\boxed{8}", delay_s=0.002)
    results = _solve_two_at_once(load_config("tiny", overrides=AUTO), engine, ScriptedSandbox(printed("8")))
    assert engine.peak == 3  # reached, and never passed
    assert [(r.repetitions, r.launched, r.answer) for r in results] == [(5, 5, "8"), (5, 5, "8")]


def test_scripted_engine_auto_workers_share_slots_freed_by_code_across_problems():
    # Repetitions leave the engine while their code runs; a problem that holds no slot at all must be woken by
    # the other's changes and still run all its repetitions.
    def script(req):  # type: ignore[no-untyped-def]
        if req.turn == 0 and req.repetition % 2 == 0:
            return "work " * 5 + "```python\nprint(8)\n```\n"
        return "word " * 10 + "so \\boxed{8}"

    engine = _PeakEngine(script, delay_s=0.002)
    sandbox = ScriptedSandbox(printed("8"), delay_s=0.02)
    results = _solve_two_at_once(load_config("tiny", overrides=AUTO), engine, sandbox)
    assert [(r.repetitions, r.launched, r.answer) for r in results] == [(5, 5, "8"), (5, 5, "8")]
    assert len(sandbox.ran) == 6 and engine.open_streams == 0


def test_scripted_engine_auto_workers_count_every_data_parallel_rank_of_the_batch():
    # max_num_seqs = 3 per rank and two data-parallel ranks: the engine batches 6, and auto workers fill all 6.
    overrides = {**AUTO, "solve.reps": 12, "engine.args.data_parallel_size": 2}
    engine = _PeakEngine(lambda req: "word " * 10 + "so \\boxed{8}", delay_s=0.01)
    config = load_config("tiny", overrides=overrides)
    assert ProblemSolver(config, engine, ScriptedSandbox(printed("8"))).engine_capacity() == 6
    results = _solve_two_at_once(config, engine, ScriptedSandbox(printed("8")))
    assert engine.peak == 6
    assert [(r.repetitions, r.answer) for r in results] == [(12, "8"), (12, "8")]
