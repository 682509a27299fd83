"""The Kaggle predict adapter: rows in both calling styles, answers in range, and faults that must not stop the
submission. Fault tests isolate control flow with scripted engine/sandbox doubles (named so); the engine tests
at the end run the real vLLM engine with the tiny model, built by the adapter itself on its first call."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
import polars as pl
import pytest

from solver.commands.kaggle_local import check_prediction, rehearse
from solver.config import Config, load_config
from solver.kaggle.predictor import (
    KagglePredictor,
    Row,
    RowError,
    competition,
    competition_config,
    read_row,
    to_answer,
)
from solver.types import Delta, Execution, GenerationRequest

# ---- rows and answers (pure) ---------------------------------------------------------------------------------


def test_read_row_in_the_aimo2_columns_style() -> None:
    assert read_row(pl.Series("id", ["x9"]), pl.Series("problem", ["Find 2+2."])) == Row("x9", "Find 2+2.")


def test_read_row_in_the_aimo3_frame_style_and_from_pandas() -> None:
    row = pl.DataFrame({"id": ["q1"], "problem": ["What is 3?"]})
    assert read_row(row, row.select("id").with_columns(answer=pl.lit(0))) == Row("q1", "What is 3?")
    assert read_row(pd.Series([7]), pd.Series(["p"])) == Row(7, "p")
    assert read_row(pd.DataFrame({"id": ["q1"], "problem": ["What is 3?"]})) == Row("q1", "What is 3?")


@pytest.mark.parametrize("args", [
    (), (pl.Series("id", ["a"]),), (pl.Series("id", ["a"]), pl.Series("problem", ["  "])),
    (pl.DataFrame({"id": ["a", "b"], "problem": ["x", "y"]}),), (1.5, "text"),
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


# ---- scripted doubles ----------------------------------------------------------------------------------------

Behaviour = Literal["answer", "raise", "stall", "code"]


@dataclass
class FaultyScriptedEngine:
    """A scripted engine double: ``behaviour(request)`` picks a reply — a boxed answer, an exception, a stream
    that stops producing tokens (waits forever, cancellably), or a python block for the sandbox."""

    behaviour: Callable[[GenerationRequest], Behaviour]
    answer: str = "42"
    name: str = "scripted"
    tokenizer: None = None
    requests: list[GenerationRequest] = field(default_factory=list)
    closed: bool = False

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        what = self.behaviour(request)
        if what == "raise":
            await asyncio.sleep(0.05)
            raise RuntimeError("engine core died")
        if what == "stall":
            await asyncio.Event().wait()  # no tokens, ever
        if what == "code":
            yield Delta(text="```python\nprint(6*7)\n", token_ids=(1, 2, 3))
            yield Delta(text="", token_ids=(), finish_reason="stop", stop_reason="```\n", prompt_tokens=5)
            return
        yield Delta(text=f"So the answer is \\boxed{{{self.answer}}}.", token_ids=(1, 2, 3))
        yield Delta(text="", token_ids=(), finish_reason="stop", prompt_tokens=5)

    def running_requests(self) -> int:
        return 0

    async def close(self) -> None:
        self.closed = True


@dataclass
class ScriptedSandbox:
    """A scripted sandbox double: prints ``stdout``, or raises, or blocks the whole event loop (a sync sleep)."""

    mode: Literal["print", "raise", "block"] = "print"
    stdout: str = "42\n"
    block_s: float = 0.0

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        if self.mode == "raise":
            raise OSError("sandbox worker vanished")
        if self.mode == "block":
            time.sleep(self.block_s)  # the fault under test: a call that never yields to the loop
        return Execution(code=code, status="ok", stdout=self.stdout, stderr="", duration_s=0.0)

    async def close(self) -> None:
        return None


class ScriptedSession:
    """A session double: the real ProblemSolver over scripted doubles."""

    def __init__(self, config: Config, on_repetition: Callable[..., None], engine: Any, sandbox: Any) -> None:
        self.config, self.on_repetition, self.engine, self.sandbox = config, on_repetition, engine, sandbox

    async def __aenter__(self) -> ScriptedSession:
        from solver.loop.problem import ProblemSolver

        self.solver = ProblemSolver(self.config, self.engine, self.sandbox, on_repetition=self.on_repetition)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.engine.close()


def scripted_factory(engines: list[Any], sandbox: Any | None = None,
                     fail_builds: int = 0) -> tuple[Callable[..., ScriptedSession], list[Any]]:
    """Each build takes the next engine of ``engines`` (the last one repeats); the first ``fail_builds`` raise."""
    built: list[Any] = []

    def open_session(config: Config, on_repetition: Callable[..., None]) -> ScriptedSession:
        if len(built) < fail_builds:
            built.append(None)
            raise RuntimeError("no GPU memory left")
        engine = engines[min(len(built), len(engines) - 1)]
        built.append(engine)
        return ScriptedSession(config, on_repetition, engine, sandbox or ScriptedSandbox())

    return open_session, built


def fast_config(**overrides: Any) -> Config:
    """Two repetitions per problem and a budget of a few seconds per problem."""
    base = {"solve.reps": 2, "solve.workers": 2, "sampling.max_turns": 2, "budget.total_s": 60.0,
            "budget.problems": 4, "budget.min_s": 1.0, "budget.max_s": 2.0, "budget.reserve_s": 0.0}
    return load_config("tiny", overrides={**base, **overrides})


def predictor_with(factory: Callable[..., Any], comp: str = "aimo3", **kwargs: Any) -> KagglePredictor:
    settings = {"probe_timeout_s": 1.0, "close_timeout_s": 2.0, "grace_s": 1.0, "loop_grace_s": 1.0,
                "loop_check_s": 1.0, **kwargs}
    return KagglePredictor(fast_config(), comp, open_session=factory, **settings)


def aimo3_row(row_id: str, text: str = "What is 6 times 7?") -> tuple[pl.DataFrame, pl.DataFrame]:
    row = pl.DataFrame({"id": [row_id], "problem": [text]})
    return row, row.select("id").with_columns(answer=pl.lit(0))


def assert_valid_frame(frame: pl.DataFrame, row_id: str, comp: str = "aimo3") -> int:
    c = competition(comp)
    answer, fault = check_prediction(frame, row_id, c.low, c.high)
    assert fault is None, fault
    assert frame.columns == ["id", "answer"] and frame.schema["answer"] == pl.Int64
    assert answer is not None
    return answer


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
        frame = predict(pl.Series("id", ["a2"]), pl.Series("problem", ["Compute 2025."]))
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
        predict._open_session = factory_ok  # the next build gets a sane sandbox
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
    predict = KagglePredictor(fast_config(), "aimo3", open_session=factory, start=time.monotonic() - 3600)
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
        frame = predict(pl.DataFrame({"id": ["bad"], "problem": [""]}))
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


def test_scripted_local_gateway_rehearsal_writes_the_submission(tmp_path: Path) -> None:
    data = tmp_path / "test.csv"
    pl.DataFrame({"id": ["a", "b", "c"], "problem": ["x?", "y?", "z?"], "answer": ["42", "42", "7"]}
                 ).write_csv(data)
    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory, comp="aimo2")
    try:
        rehearsal = rehearse(predict, data, tmp_path / "out", comp=competition("aimo2"), seed=3)
    finally:
        predict.close()
    assert rehearsal.faults == [] and rehearsal.score == (2, 3)
    submission = pl.read_parquet(tmp_path / "out" / "submission.parquet")
    assert sorted(submission["id"].to_list()) == ["a", "b", "c"] and submission["answer"].dtype == pl.Int64
    assert (tmp_path / "out" / "submission.csv").read_text().startswith("id,answer\n")
    assert "score: 2/3" in (tmp_path / "out" / "report.md").read_text()
    assert [c.limit_s for c in rehearsal.calls] == [None, 1800.0, 1800.0]


def test_rehearsal_records_a_predict_that_raises_or_answers_out_of_range(tmp_path: Path) -> None:
    data = tmp_path / "test.csv"
    pl.DataFrame({"id": ["a", "b"], "problem": ["x?", "y?"]}).write_csv(data)

    def predict(row: pl.DataFrame, _sample: pl.DataFrame) -> pl.DataFrame:
        if row["id"].item(0) == "a":
            raise RuntimeError("boom")
        return pl.DataFrame({"id": ["b"], "answer": [123456]})

    rehearsal = rehearse(predict, data, tmp_path / "out", comp=competition("aimo3"))
    assert sorted(rehearsal.faults) == ["a: predict raised RuntimeError: boom", "b: answer 123456 is outside 0..99999"]


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
    predict = KagglePredictor(config, "aimo3", run_dir=tmp_path_factory.mktemp("kaggle") / "run",
                              probe_timeout_s=60.0)
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


# ---- the command's input errors ------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, message", [
    (["kaggle-local", "no-such-file.csv"], "no such file"),
    (["kaggle-local", "demo", "--competition", "aimo9"], "invalid choice"),
    (["kaggle-local", "demo", "--time-limit", "0"], "--time-limit"),
    (["kaggle-local", "demo", "--set", "solve.reps=0"], "solve.reps"),
])
def test_kaggle_local_bad_input_is_one_line_and_exit_2(argv: list[str], message: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "solver", *argv, "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr
    assert not (tmp_path / "out").exists()


def test_kaggle_local_command_rehearses_a_recorded_run_through_the_replay_engine(tmp_path: Path) -> None:
    """The whole command (config, predictor, local gateway, outputs), with generation replayed from a run the
    scripted engine double recorded."""
    import subprocess
    import sys

    data = tmp_path / "test.csv"
    pl.DataFrame({"id": ["a", "b", "c"], "problem": ["x?", "y?", "z?"], "answer": ["42", "42", "7"]}
                 ).write_csv(data)
    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    recorder = predictor_with(factory, run_dir=tmp_path / "recorded")
    try:
        for row_id in ("a", "b", "c"):
            recorder(*aimo3_row(row_id))
    finally:
        recorder.close()
    argv = ["kaggle-local", str(data), "--competition", "aimo2", "--engine", "replay", "--from",
            str(tmp_path / "recorded"), "--set", "engine.replay_time_scale=0", "--seed", "5",
            "--out", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, "-m", "solver", *argv], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    submission = pl.read_parquet(tmp_path / "out" / "submission.parquet")
    assert sorted(submission.rows()) == [("a", 42), ("b", 42), ("c", 42)]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "score: 2/3" in report and "faults: 0" in report
    calls = (tmp_path / "out" / "run" / "calls.jsonl").read_text().splitlines()
    assert len(calls) == 3 and all('"status": "solved"' in line for line in calls)


# ---- serving through kaggle_evaluation (a stand-in package with the same entry points) -------------------------

_STAND_IN_SERVER = '''
import polars as pl

calls = []


class AIMO3InferenceServer:
    """Stand-in for Kaggle's server: the same constructor and entry points, a plain loop for a gateway."""

    def __init__(self, predict):
        self.predict = predict

    def serve(self):
        calls.append(("serve", None))

    def run_local_gateway(self, data_paths):
        calls.append(("run_local_gateway", data_paths))
        test = pl.read_csv(data_paths[0])
        frames = []
        for row in test.iter_slices(n_rows=1):
            frames.append(self.predict(row, row.select("id").with_columns(pl.lit(0).alias("answer"))))
        pl.concat(frames, how="vertical_relaxed").write_parquet("submission.parquet")
'''


@pytest.fixture
def stand_in_kaggle_evaluation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    package = tmp_path / "site" / "kaggle_evaluation"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "aimo_3_inference_server.py").write_text(_STAND_IN_SERVER)
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    import importlib

    importlib.invalidate_caches()
    module = importlib.import_module("kaggle_evaluation.aimo_3_inference_server")
    yield module
    import sys

    for name in [n for n in sys.modules if n.startswith("kaggle_evaluation")]:
        del sys.modules[name]


def test_serve_uses_the_competition_server_on_a_rerun_and_its_gateway_otherwise(
        stand_in_kaggle_evaluation: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from solver.kaggle.predictor import serve

    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    data = tmp_path / "test.csv"
    pl.DataFrame({"id": ["a", "b"], "problem": ["x?", "y?"]}).write_csv(data)
    monkeypatch.chdir(tmp_path)
    try:
        monkeypatch.setenv("KAGGLE_IS_COMPETITION_RERUN", "1")
        serve(predict, data)
        monkeypatch.delenv("KAGGLE_IS_COMPETITION_RERUN")
        serve(predict, data)
    finally:
        predict.close()
    assert stand_in_kaggle_evaluation.calls == [("serve", None), ("run_local_gateway", (str(data),))]
    assert pl.read_parquet(tmp_path / "submission.parquet").rows() == [("a", 42), ("b", 42)]


def test_kaggle_local_prefers_kaggle_evaluation_when_importable(stand_in_kaggle_evaluation: Any,
                                                                tmp_path: Path) -> None:
    from solver.commands.kaggle_local import rehearse_official

    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = predictor_with(factory)
    data = tmp_path / "test.csv"
    pl.DataFrame({"id": ["a", "b"], "problem": ["x?", "y?"], "answer": ["42", "1"]}).write_csv(data)
    here = Path.cwd()
    try:
        rehearsal = rehearse_official(predict, data, tmp_path / "out", comp=competition("aimo3"))
    finally:
        predict.close()
    assert Path.cwd() == here, "the working directory is restored"
    assert rehearsal is not None and rehearsal.gateway == "kaggle_evaluation"
    assert rehearsal.score == (1, 2)
    assert pl.read_parquet(tmp_path / "out" / "submission.parquet").height == 2
    assert "kaggle_evaluation gateway" in (tmp_path / "out" / "report.md").read_text()
