"""The Kaggle predict adapter: rows as the gateway passes them, answers in range, names checked before anything
loads, and faults that must not stop the submission. Fault tests isolate control flow with scripted
engine/sandbox doubles (named so, in kaggle_doubles.py); the engine tests at the end run the real vLLM engine
with the tiny model, built by the adapter itself on its first call."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pytest
from kaggle_doubles import (
    FaultyScriptedEngine,
    ScriptedSandbox,
    columns,
    fast_config,
    scripted_factory,
)

from solver.config import ConfigError, load_config
from solver.kaggle.competition import competition, competition_config
from solver.kaggle.predictor import KagglePredictor, PredictorOptions
from solver.kaggle.supervisor import EngineLimits
from solver.kaggle.rows import Row, RowError, check_prediction, read_row, to_answer

# ---- rows and answers (pure) ---------------------------------------------------------------------------------


def test_read_row_takes_the_rows_columns_as_the_gateway_passes_them() -> None:
    assert read_row(pl.Series("id", ["x9"]), pl.Series("problem", ["Find 2+2."])) == Row("x9", "Find 2+2.")
    assert read_row(pl.Series("id", ["a1"]), pl.Series("question", ["AIMO2?"])) == Row("a1", "AIMO2?")
    assert read_row(pd.Series([7]), pd.Series(["p"])) == Row(7, "p")
    assert read_row(pl.Series("id", [3]), pl.Series("problem", ["int ids stay ints"])) == Row(3, "int ids stay ints")


@pytest.mark.parametrize("args", [
    (), (pl.Series("id", ["a"]),), (pl.Series("id", ["a"]), pl.Series("problem", ["  "])),
    (pl.Series("id", ["a", "b"]), pl.Series("problem", ["x", "y"])), (1.5, "text"),
    (pl.DataFrame({"id": ["a"], "problem": ["x"]}),),
])
def test_read_row_refuses_what_is_not_one_problem(args: tuple[Any, ...]) -> None:
    with pytest.raises(RowError):
        read_row(*args)


def test_answers_follow_the_competition_rules() -> None:
    aimo2, aimo3 = competition("aimo2"), competition("aimo3")
    assert [to_answer(v, aimo2) for v in ("7", "1999", "-1", "2.5", None)] == [7, 999, 999, 0, 0]
    assert [to_answer(v, aimo3) for v in ("99999", "100000", "12")] == [99999, 0, 12]


def test_competition_config_bounds_the_budget_by_the_call_limit_and_total() -> None:
    config = load_config("h100")
    aimo2 = competition_config(config.replace({"budget.max_s": 5000}), competition("aimo2"))
    assert aimo2.budget.max_s == 30 * 60 - 60  # the per-call limit minus the margin
    assert aimo2.answers.modulus == 1000 and aimo2.answers.high == 999
    short = competition_config(config, competition("aimo3"), total_s=1200)
    assert short.budget.total_s == 1200 and short.budget.cutoff_s == 1200 - config.budget.reserve_s
    assert short.answers.modulus is None and short.answers.high == 99999


FAST_LIMITS = EngineLimits(probe_timeout_s=1.0, close_timeout_s=2.0, grace_s=1.0, loop_grace_s=1.0, loop_check_s=1.0)


def predictor_with(factory: Any, comp: str = "aimo3", max_builds: int = 3, **options: Any) -> KagglePredictor:
    limits = dataclasses.replace(FAST_LIMITS, max_builds=max_builds)
    return KagglePredictor(fast_config(), comp, PredictorOptions(open_session=factory, limits=limits, **options))


def aimo3_row(row_id: str, text: str = "What is 6 times 7?") -> tuple[pl.Series, pl.Series]:
    return columns(row_id, text)


def assert_valid_frame(frame: pl.DataFrame, row_id: str, comp: str = "aimo3") -> int:
    c = competition(comp)
    answer, fault = check_prediction(frame, row_id, c.low, c.high)
    assert fault is None, fault
    assert frame.columns == ["id", "answer"] and frame.schema["answer"] == pl.Int64
    assert answer is not None
    return answer


# ---- bad names fail when the predictor is built --------------------------------------------------------------


@pytest.mark.parametrize("override, message", [
    ({"vote.voter": "no-such-voter"}, "no-such-voter"),
    ({"stop.stoppers": ["no-such-stopper"]}, "no-such-stopper"),
    ({"prompt.template": "no-such-prompt"}, "no-such-prompt"),
    ({"engine.name": "no-such-engine"}, "no-such-engine"),
])
def test_a_bad_name_fails_when_the_predictor_is_built_before_any_engine(override: dict[str, Any],
                                                                       message: str) -> None:
    config = fast_config(**override)  # the config itself loads: names are checked against the registries later
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    with pytest.raises(ConfigError, match=message) as caught:
        KagglePredictor(config, "aimo3", PredictorOptions(open_session=factory))
    assert len(str(caught.value).splitlines()) == 1
    assert built == [], "nothing was built"


# ---- the adapter with scripted doubles -----------------------------------------------------------------------


def test_scripted_engine_is_built_on_the_first_call_and_reused() -> None:
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    try:
        assert built == []  # nothing at construction
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 42
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 42
        assert len(built) == 1 and predict.builds == 1
        assert [c.status for c in predict.calls] == ["solved", "solved"]
    finally:
        predict.close()


def test_scripted_aimo2_columns_style_applies_the_modulus() -> None:
    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer", answer="2025")])
    predict = predictor_with(factory, comp="aimo2")
    try:
        frame = predict(*columns("a2", "Compute 2025.", column="question"))
        assert assert_valid_frame(frame, "a2", "aimo2") == 25
    finally:
        predict.close()


def test_scripted_engine_raising_gives_the_default_then_a_rebuilt_engine_serves() -> None:
    broken = FaultyScriptedEngine(lambda r: "raise")
    factory, built = scripted_factory([broken, FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    try:
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 0
        # Every repetition failed in the engine (an error status each): the default answer, and the engine is
        # suspected and replaced before the next problem.
        assert predict.calls[-1].status == "default" and predict.calls[-1].repetitions == 2
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 42
        assert broken.closed, "the failed engine was closed"
        assert len(built) == 2 and predict.calls[-1].status == "solved"
    finally:
        predict.close()


def test_scripted_engine_failing_midway_returns_the_best_answer_so_far() -> None:
    # Repetition 0 answers at once; repetition 1 fails in the engine (an error status): the answer's vote stands.
    engine = FaultyScriptedEngine(lambda r: "answer" if r.repetition == 0 else "raise", answer="17")
    factory, _ = scripted_factory([engine])
    predict = predictor_with(factory)
    try:
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 17
        assert predict.calls[-1].status == "solved" and predict.calls[-1].repetitions == 2
    finally:
        predict.close()


def test_scripted_engine_that_stops_producing_tokens_answers_on_time_and_is_replaced() -> None:
    stalled = FaultyScriptedEngine(lambda r: "stall")
    factory, built = scripted_factory([stalled, FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    try:
        t0 = time.monotonic()
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 0
        # the budget (≤ 2 s) and the solver's grace (1 s); the engine is checked at the next call
        assert time.monotonic() - t0 < 3.5
        assert predict.calls[-1].stopped_by == "deadline"
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 42
        assert stalled.closed and len(built) == 2
    finally:
        predict.close()


def test_scripted_sandbox_raising_still_answers_and_keeps_the_healthy_engine() -> None:
    engine = FaultyScriptedEngine(lambda r: "code")
    factory, built = scripted_factory([engine], sandbox=ScriptedSandbox(mode="raise"))
    predict = predictor_with(factory)
    try:
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 0
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 0
        assert len(built) == 1, "the engine answered the probe, so it was kept"
    finally:
        predict.close()


def test_scripted_sandbox_blocking_the_loop_is_bounded_and_the_next_problem_gets_a_new_loop() -> None:
    engine = FaultyScriptedEngine(lambda r: "code")
    factory, built = scripted_factory([engine], sandbox=ScriptedSandbox(mode="block", block_s=6.0))
    predict = predictor_with(factory)
    try:
        t0 = time.monotonic()
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 0
        # the budget ≤ 2 s + grace 1 s + loop grace 1 s; the blocked loop needed 6 s
        assert time.monotonic() - t0 < 4.5
        assert predict.calls[-1].stopped_by == "timeout"
        factory_ok, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
        predict.supervisor.open_session = factory_ok  # the next build gets a sane sandbox
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 42
    finally:
        predict.close()


def test_scripted_engine_build_failure_answers_the_default_and_retries_next_call() -> None:
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")], fail_builds=1)
    predict = predictor_with(factory)
    try:
        assert assert_valid_frame(predict(*aimo3_row("p1")), "p1") == 0
        assert predict.calls[-1].stopped_by == "no_engine" and "no GPU memory" in (predict.calls[-1].note or "")
        assert assert_valid_frame(predict(*aimo3_row("p2")), "p2") == 42
        assert predict.builds == 2
    finally:
        predict.close()


def test_scripted_builds_are_bounded() -> None:
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")], fail_builds=10)
    predict = predictor_with(factory, max_builds=2)
    try:
        for i in range(4):
            assert assert_valid_frame(predict(*aimo3_row(f"p{i}")), f"p{i}") == 0
        assert len(built) == 2 and predict.builds == 2
    finally:
        predict.close()


def test_past_the_cutoff_answers_the_default_at_once_without_an_engine() -> None:
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = KagglePredictor(fast_config(), "aimo3",
                              PredictorOptions(open_session=factory, start=time.monotonic() - 3600))
    try:
        t0 = time.monotonic()
        assert assert_valid_frame(predict(*aimo3_row("late")), "late") == 0
        assert time.monotonic() - t0 < 0.5
        assert predict.calls[-1].status == "cutoff" and built == []
    finally:
        predict.close()


def test_unreadable_row_still_returns_a_frame_with_the_id() -> None:
    factory, built = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    try:
        frame = predict(pl.Series("id", ["bad"]), pl.Series("problem", [""]))
        assert frame.to_dicts() == [{"id": "bad", "answer": 0}]
        assert predict.calls[-1].status == "bad_input" and built == []
    finally:
        predict.close()


def test_scripted_run_dir_logs_calls_and_repetitions(tmp_path: Path) -> None:
    from solver.runlog import read_log

    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory, run_dir=tmp_path / "run")
    try:
        predict(*aimo3_row("p1"))
    finally:
        predict.close()
    records = read_log(tmp_path / "run")
    assert [p.id for p in records.problems] == ["p1"]
    assert [r.problem_id for r in records.results] == ["p1"]
    assert len([r for r in records.repetitions if r.status == "done"]) == 2
    assert '"status": "solved"' in (tmp_path / "run" / "calls.jsonl").read_text()
    # Written at close through the same run-directory session as solver solve: the answers and the report.
    assert (tmp_path / "run" / "answers.csv").read_text() == f"id,answer\np1,{records.results[0].answer}\n"
    assert "| p1 |" in (tmp_path / "run" / "report.md").read_text()


def test_the_seed_policy_fixed_repeats_the_seeds_and_per_run_takes_the_runs_own(tmp_path: Path) -> None:
    """AIMO3 runs the notebook twice over the private set. Under ``fixed`` both runs send the same seeds; under
    ``per-run`` each run draws its own base, and the run log's config says which."""
    from solver.config import Config
    from solver.runlog import read_log

    def seeds(policy: str, run: str, entropy: int | None = None) -> tuple[list[int | None], Config]:
        engine = FaultyScriptedEngine(lambda r: "answer")
        factory, _ = scripted_factory([engine])
        predict = KagglePredictor(fast_config().replace({"sampling.seed_policy": policy}), "aimo3",
                                  PredictorOptions(open_session=factory, run_dir=tmp_path / run, limits=FAST_LIMITS,
                                                   entropy=entropy))
        try:
            predict(*aimo3_row("p1"))
        finally:
            predict.close()
        return sorted(r.seed for r in engine.requests), read_log(tmp_path / run).config

    first, logged = seeds("fixed", "fixed1")
    again, _ = seeds("fixed", "fixed2")
    assert first == again and logged.sampling.seed == fast_config().sampling.seed
    own, logged_own = seeds("per-run", "per1", entropy=1234)
    other, logged_other = seeds("per-run", "per2")  # drawn from the system's entropy
    assert logged_own.sampling.seed == 1234 and logged_own.sampling.seed_policy == "per-run"
    assert logged_other.sampling.seed != 1234 and len({tuple(first), tuple(own), tuple(other)}) == 3


# ---- the real engine ----------------------------------------------------------------------------------------


def _engine_core_processes() -> list[Any]:
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            label = child.name() + " " + " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "EngineCore" in label:
            found.append(child)
    return found


@pytest.fixture(scope="module")
def real_predictor(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One adapter over the real engine for the module; it builds the engine on its first call."""
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    config = load_config("tiny", overrides={
        "sampling.max_tokens": 32, "sampling.max_total_tokens": 64, "sampling.max_turns": 2,
        "solve.reps": 2, "solve.workers": 2, "budget.problems": 4, "budget.max_s": 120.0})
    predict = KagglePredictor(config, "aimo3", PredictorOptions(run_dir=tmp_path_factory.mktemp("kaggle") / "run",
                                                                limits=EngineLimits(probe_timeout_s=60.0)))
    yield predict
    predict.close()


@pytest.mark.engine
def test_real_engine_answers_two_problems_with_valid_frames(real_predictor: KagglePredictor) -> None:
    for row_id, text in [("r1", "What is 2 + 3?"), ("r2", "Compute 10 - 4.")]:
        frame = real_predictor(*aimo3_row(row_id, text))
        assert_valid_frame(frame, row_id)
    assert real_predictor.builds == 1
    assert [c.status for c in real_predictor.calls] in (["solved", "solved"], ["solved", "default"],
                                                       ["default", "solved"], ["default", "default"])
    assert all(c.generated_tokens > 0 for c in real_predictor.calls), "the tiny model generated tokens"


@pytest.mark.engine
def test_real_engine_core_killed_is_rebuilt_and_the_next_problems_are_served(
        real_predictor: KagglePredictor) -> None:
    if not real_predictor.calls:
        real_predictor(*aimo3_row("warm", "What is 1 + 1?"))
    cores = _engine_core_processes()
    assert cores, "the engine core runs in its own process"
    for core in cores:
        core.kill()
    for core in cores:
        core.wait(timeout=30)
    builds = real_predictor.builds
    frame = real_predictor(*aimo3_row("after-kill", "What is 3 + 4?"))
    assert_valid_frame(frame, "after-kill")
    frame = real_predictor(*aimo3_row("next", "What is 5 + 5?"))
    assert_valid_frame(frame, "next")
    assert real_predictor.builds == builds + 1, "one rebuild after the kill"
    assert real_predictor.calls[-1].generated_tokens > 0, "the rebuilt engine generates"
    assert _engine_core_processes(), "a new engine core is running"


# ---- the rehearsal's check of the compile cache's start line --------------------------------------------------


@pytest.mark.parametrize("line, loaded", [
    ("the compile cache C: used (built for vLLM 0.26.0, ...); at start: graphs loaded, 0 Triton kernels compiled "
     "(266 shipped), 58.3 s", True),
    ("the compile cache C: used (built for vLLM 0.26.0, ...); at start: graphs compiled again (3 saved), 0 Triton "
     "kernels compiled (266 shipped), 150.0 s", False),
    ("the compile cache C: the engine failed to start with it (FileNotFoundError: ...); started again without it",
     False),
])
def test_a_rehearsal_fails_on_a_cache_whose_graphs_did_not_load_and_a_rerun_never_does(
        line: str, loaded: bool, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine's compile-cache verdict, as the supervisor kept it from the built engine, is what the notebook's
    last cell checks: an interactive rehearsal raises with the line, a competition rerun only prints it."""
    from solver.engines.compile_cache import CacheVerdict
    from solver.kaggle import CacheNotLoaded

    engine = FaultyScriptedEngine(lambda r: "answer")
    engine.compile_cache = CacheVerdict(": used (" in line, line)  # type: ignore[attr-defined]
    factory, built = scripted_factory([engine])
    config = fast_config().replace({"engine.compile_cache": str(tmp_path)})
    predict = KagglePredictor(config, "aimo3", PredictorOptions(open_session=factory, limits=FAST_LIMITS))
    monkeypatch.delenv("KAGGLE_IS_COMPETITION_RERUN", raising=False)
    try:
        with pytest.raises(CacheNotLoaded, match="no engine started with the compile cache"):
            predict.check_compile_cache()  # nothing served yet
        assert_valid_frame(predict(*aimo3_row("p1")), "p1")
        if loaded:
            assert predict.check_compile_cache() == line
        else:
            with pytest.raises(CacheNotLoaded) as caught:
                predict.check_compile_cache()
            assert str(caught.value) == line
        monkeypatch.setenv("KAGGLE_IS_COMPETITION_RERUN", "1")
        assert predict.check_compile_cache() == line  # the submission's own run never fails on it
    finally:
        predict.close()
    plain = KagglePredictor(fast_config(), "aimo3", PredictorOptions(open_session=factory, limits=FAST_LIMITS))
    assert plain.check_compile_cache() == "no compile cache set"
