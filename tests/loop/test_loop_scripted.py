"""Control flow of the repetition loop and the problem solver, isolated with a scripted engine double."""

from __future__ import annotations

import asyncio

import pytest
from doubles import ScriptedEngine, ScriptedSandbox, printed

from solver.config import load_config
from solver.dialects import make_dialect
from solver.loop.repetition import run_repetition
from solver.loop.problem import ProblemSolver
from solver.types import Execution, GenerationRequest, Problem

PROBLEM = Problem("p1", "What is 6 times 7?", answer="42")


def config(**overrides):
    return load_config("tiny", overrides={"sampling.max_tokens": 200, "sampling.max_total_tokens": 1000,
                                          "sampling.max_turns": 4, **overrides})


def builder(cfg):
    return make_dialect(cfg, None)


def run(coro):
    return asyncio.run(coro)


def test_scripted_engine_code_turn_then_boxed_answer():
    def script(req: GenerationRequest) -> str:
        if req.turn == 0:
            return "Compute it.\n```python\nprint(6*7)\n```\nmore text never reached"
        assert "```output\n42\n```" in req.prompt  # the tool output was appended for the next turn
        return "The code says 42, so the answer is \\boxed{42}."

    engine, sandbox = ScriptedEngine(script), ScriptedSandbox(printed("42"))
    cfg = config()
    rep = run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox, dialect=builder(cfg), config=cfg))
    assert rep.status == "done"
    assert [t.finish_reason for t in rep.turns] == ["stop", "stop"]
    assert sandbox.ran == ["print(6*7)\n"]
    assert rep.turns[0].execution is not None and rep.turns[0].execution.stdout == "42\n"
    assert {a.source for a in rep.answers} == {"code", "boxed"}
    assert rep.answer_from("boxed").value == "42" and rep.answer_from("code").value == "42"
    assert "```output\n42\n```" in rep.text


def test_scripted_engine_turn_limit_gives_length_status():
    engine = ScriptedEngine(lambda req: "again\n```python\nprint(1)\n```\n")
    cfg = config(**{"sampling.max_turns": 3})
    rep = run(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("1")),
                             dialect=builder(cfg), config=cfg))
    assert rep.status == "length" and len(rep.turns) == 3 and len(engine.requests) == 3


def test_scripted_engine_total_token_budget_shrinks_requests():
    engine = ScriptedEngine(lambda req: " ".join(["w"] * 500))
    cfg = config(**{"sampling.max_tokens": 30, "sampling.max_total_tokens": 50})
    rep = run(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("")),
                             dialect=builder(cfg), config=cfg))
    assert rep.status == "length"
    assert [r.max_tokens for r in engine.requests] == [30]
    assert rep.generated_tokens == 30


def test_scripted_engine_first_answer_stops_the_request():
    engine = ScriptedEngine(lambda req: "So \\boxed{42} and then a lot more words " + "x " * 100)
    cfg = config(**{"stop.first_answer": True})
    rep = run(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("")),
                             dialect=builder(cfg), config=cfg))
    assert rep.status == "done" and rep.answer_from("boxed").value == "42"
    assert rep.generated_tokens < 10 and engine.aborted  # the stream was left early


def test_scripted_engine_error_is_a_value():
    class Broken(ScriptedEngine):
        async def stream(self, request):
            from solver.types import Delta
            yield Delta(text="", token_ids=(), finish_reason="error", error="engine died")

    cfg = config()
    rep = run(run_repetition(PROBLEM, 0, engine=Broken(lambda r: ""), sandbox=ScriptedSandbox(printed("")),
                             dialect=builder(cfg), config=cfg))
    assert rep.status == "error" and rep.error == "engine died" and not rep.votes


def test_scripted_engine_stop_cancels_in_flight_and_returns_early():
    """Two fast repetitions agree, the stopper fires, the slow ones are aborted and logged as cancelled."""
    def script(req: GenerationRequest) -> str:
        return "\\boxed{42}" if req.repetition < 2 else "slow " * 400 + "\\boxed{7}"

    engine = ScriptedEngine(script, delay_s=0.01)
    cfg = config(**{"solve.reps": 6, "solve.workers": 4, "stop.stoppers": ["agree:2"]})
    logged = []
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("")), on_repetition=logged.append)
    result = run(solver.solve(PROBLEM))
    assert result.answer == "42" and result.correct is True
    assert result.stopped_by != "max_reps"
    # The slow repetitions (400 deltas of 10 ms each) were aborted mid-stream, not waited for.
    assert engine.open_streams == 0 and len(engine.aborted) == 2
    statuses = sorted(r.status for r in logged)
    assert statuses == ["cancelled", "cancelled", "done", "done"]
    assert result.launched == 4 and result.repetitions == 2


def test_scripted_engine_deadline_returns_best_answer_so_far():
    from solver.core.clock import SystemClock

    def script(req):
        return "\\boxed{5}" if req.repetition == 0 else "slow " * 1000
    engine = ScriptedEngine(script, delay_s=0.01)
    cfg = config(**{"solve.reps": 3, "solve.workers": 3})
    clock = SystemClock()
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("")), clock=clock)
    result = run(solver.solve(PROBLEM, deadline=clock.now() + 0.5))
    assert result.stopped_by == "deadline" and result.answer == "5"
    assert engine.open_streams == 0


def test_scripted_engine_past_deadline_gives_default_at_once():
    from doubles import FakeClock

    engine = ScriptedEngine(lambda req: "\\boxed{5}")
    cfg = config()
    clock = FakeClock(100.0)
    result = run(ProblemSolver(cfg, engine, ScriptedSandbox(printed("")), clock=clock)
                 .solve(PROBLEM, deadline=99.0))
    assert result.answer == cfg.answers.default and result.stopped_by == "deadline"
    assert engine.requests == []


def test_scripted_engine_resume_counts_done_repetitions():
    engine = ScriptedEngine(lambda req: "\\boxed{9}")
    cfg = config(**{"solve.reps": 3, "solve.workers": 2})
    first = run(ProblemSolver(cfg, engine, ScriptedSandbox(printed(""))).solve(PROBLEM))
    assert first.repetitions == 3
    logged = []
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("")), on_repetition=logged.append)
    done = [r for r in logged]  # nothing logged yet: the resumed problem reruns everything
    again = run(solver.solve(PROBLEM, done=done))
    assert sorted(r.index for r in logged) == [0, 1, 2] and again.answer == "9"


def test_scripted_sandbox_error_output_is_shown_to_the_model():
    failing = lambda code: Execution(code, "error", "", "Traceback...\nZeroDivisionError: division by zero", 0.01)

    def script(req):
        if req.turn == 0:
            return "```python\nprint(1/0)\n```\n"
        assert "ZeroDivisionError" in req.prompt
        return "\\boxed{3}"

    cfg = config()
    rep = run(run_repetition(PROBLEM, 0, engine=ScriptedEngine(script), sandbox=ScriptedSandbox(failing),
                             dialect=builder(cfg), config=cfg))
    assert rep.status == "done" and rep.executions[0].status == "error"
    assert rep.answer_from("code") is None


class ConfidentScriptedEngine(ScriptedEngine):
    """Scripted engine double that also reports per-token confidences: repetitions >= 2 are unsure."""

    async def stream(self, request):
        from solver.types import Delta

        self.requests.append(request)
        self.open_streams += 1
        try:
            sure = request.repetition < 2
            for i in range(40):
                yield Delta(text=" w", token_ids=(i,), confidences=(5.0 if sure else 0.5,))
            yield Delta(text=" \\boxed{8}", token_ids=(99,), confidences=(5.0,))
            yield Delta(text="", token_ids=(), finish_reason="stop", prompt_tokens=3)
        finally:
            self.open_streams -= 1


def test_scripted_engine_confidence_filter_cuts_unsure_repetitions_after_warmup():
    engine = ConfidentScriptedEngine(lambda r: "")
    cfg = config(**{"sampling.logprobs": 5, "solve.reps": 5, "solve.workers": 1,
                    "stop.confidence_warmup": 2, "stop.confidence_window": 8, "stop.confidence_percentile": 10})
    logged = []
    result = run(ProblemSolver(cfg, engine, ScriptedSandbox(printed("")), on_repetition=logged.append)
                 .solve(PROBLEM))
    by_index = {r.index: r for r in logged}
    assert [by_index[i].status for i in range(5)] == ["done", "done", "filtered", "filtered", "filtered"]
    assert all(by_index[i].generated_tokens < 41 for i in (2, 3, 4))  # cut while streaming
    assert by_index[0].turns[0].confidence == pytest.approx(5.0)
    assert result.votes == {"8": 2.0}


def test_scripted_engine_auto_workers_fill_engine_slots_while_code_runs():
    """Auto workers launch another repetition whenever one leaves the engine to run code."""
    def script(req):
        return "```python\nprint(8)\n```\n" if req.turn == 0 else "\\boxed{8}"

    def started_before_first_finish(workers: int) -> int:
        engine = ScriptedEngine(script)
        engine.capacity = 2  # the batch this engine double says it can hold
        finished_at = []
        sandbox = ScriptedSandbox(printed("8"), delay_s=0.2)
        cfg = config(**{"solve.reps": 6, "solve.workers": workers})
        solver = ProblemSolver(cfg, engine, sandbox, on_repetition=lambda r: finished_at.append(len(engine.requests)))
        result = run(solver.solve(PROBLEM))
        assert result.repetitions == 6 and result.answer == "8"
        first_turns = [r for r in engine.requests[: finished_at[0]] if r.turn == 0]
        return len(first_turns)

    assert started_before_first_finish(2) == 2
    assert started_before_first_finish(0) == 6


@pytest.mark.parametrize("parallel", [1, 3])
def test_scripted_engine_run_writes_log_answers_and_report(tmp_path, parallel):
    from solver.loop.run import solve_run
    from solver.runlog import read_log

    problems = [Problem(f"p{i}", f"What is {i} + {i}?", answer=str(2 * i)) for i in range(3)]
    engine = ScriptedEngine(lambda req: f"\\boxed{{{2 * int(req.problem_id[1:])}}}", delay_s=0.002)
    cfg = config(**{"solve.reps": 3, "solve.workers": 2, "solve.parallel_problems": parallel})
    results = run(solve_run(cfg, problems, tmp_path / "run", engine=engine,
                            sandbox=ScriptedSandbox(printed(""))))
    assert [r.problem_id for r in results] == ["p0", "p1", "p2"] and all(r.correct for r in results)
    assert (tmp_path / "run" / "answers.csv").read_text() == "id,answer\np0,0\np1,2\np2,4\n"
    assert "3/3 = 100.0 %" in (tmp_path / "run" / "report.md").read_text()
    records = read_log(tmp_path / "run")
    assert len(records.repetitions) == 9 and len(records.results) == 3 and len(records.problems) == 3
    if parallel > 1:  # the problems shared the engine: requests of several problems interleaved
        order = [r.problem_id for r in engine.requests]
        assert order != sorted(order)


def test_scripted_engine_requests_carry_sampling_extra_and_launch_order_priority():
    """Every turn of a repetition carries ``sampling.extra`` unchanged and the repetition's launch order as its
    priority, counted across the problems one solver serves (earlier-launched work goes first)."""
    def script(req: GenerationRequest) -> str:
        return "x\n```python\nprint(1)\n```\n" if req.turn == 0 else "\\boxed{1}"

    engine = ScriptedEngine(script)
    cfg = config(**{"solve.reps": 3, "solve.workers": 3, "sampling.extra": {"min_p": 0.05}})
    solver = ProblemSolver(cfg, engine, ScriptedSandbox(printed("1")))
    run(solver.solve(PROBLEM))
    run(solver.solve(Problem("p2", "again")))
    assert all(dict(r.extra) == {"min_p": 0.05} for r in engine.requests)
    by_rep = {(r.problem_id, r.repetition): set() for r in engine.requests}
    for r in engine.requests:
        by_rep[(r.problem_id, r.repetition)].add(r.priority)
    assert all(len(p) == 1 for p in by_rep.values())  # both turns of a repetition share it
    assert sorted(p.pop() for p in by_rep.values()) == list(range(6))
    assert {r.priority for r in engine.requests if r.problem_id == "p2"} == {3, 4, 5}


def test_scripted_engine_repetition_confidence_is_the_core_window_also_for_short_traces():
    """The loop's online window is core.confidence.ConfidenceWindow: a repetition shorter than one window gets its
    mean as its group confidence (as lowest_group_confidence says offline), not None; a longer one the lowest
    full-window mean."""
    from solver.core.confidence import lowest_group_confidence

    for window in (8, 100):  # 41 tokens: several windows of 8, less than one of 100
        engine = ConfidentScriptedEngine(lambda r: "")
        cfg = config(**{"sampling.logprobs": 5, "stop.confidence_window": window})
        rep = run(run_repetition(PROBLEM, 0, engine=engine, sandbox=ScriptedSandbox(printed("")),
                                 dialect=builder(cfg), config=cfg))
        assert rep.turns[0].tail_confidence == pytest.approx(lowest_group_confidence([5.0] * 41, window))
