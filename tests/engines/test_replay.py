"""Replay engine (recorded completions served as streams) and the sample importer (other tools' files as runs)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from solver.cli import main
from solver.config import Config, ConfigError
from solver.replay.calls import RecordedCalls, served
from solver.replay.replay_engine import (
    ReplayEngine,
    TimingModel,
    open_replay_engine,
    pooled_repetitions,
    problems_from_log,
)
from solver.recordings import SampleFields, SampleImportError, import_samples
from solver.runlog import LogError, RunLog, read_log
from solver.types import Delta, Execution, GenerationRequest, Repetition, Turn

DATA = Path(__file__).parents[1] / "data"
FIXTURE_RUN = DATA / "replay_run"


def _fixture_module():
    spec = importlib.util.spec_from_file_location("replay_fixture", DATA / "replay_fixture.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is being built
    spec.loader.exec_module(module)
    return module


def request(pid: str, rep: int, turn: int, stop: tuple[str, ...] = ("```\n", "```output")) -> GenerationRequest:
    return GenerationRequest(f"{pid}-r{rep}-t{turn}", "prompt", None, 256, 0.8, 1.0, 0, stop,
                             problem_id=pid, repetition=rep, turn=turn)


async def collect(engine: ReplayEngine, req: GenerationRequest) -> list[Delta]:
    return [d async for d in engine.stream(req)]


class RecordingSleep:
    def __init__(self) -> None:
        self.calls: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def test_recorded_turns_stream_back_exactly():
    recorded = pooled_repetitions([FIXTURE_RUN])
    engine = ReplayEngine(recorded, TimingModel(time_scale=0))
    rep = recorded["demo-01"][0]
    for turn_no, turn in enumerate(rep.turns):
        deltas = asyncio.run(collect(engine, request("demo-01", 0, turn_no)))
        assert "".join(d.text for d in deltas) == turn.text
        assert sum(d.token_count for d in deltas) == turn.generated_tokens
        assert all(d.token_ids == () for d in deltas)
        assert deltas[0].prompt_tokens == turn.prompt_tokens
        assert [d.finish_reason for d in deltas[:-1]] == [None] * (len(deltas) - 1)
        assert deltas[-1].finish_reason == turn.finish_reason
    first = asyncio.run(collect(engine, request("demo-01", 0, 0)))
    assert len(first) > 1  # streamed in pieces, so a consumer can leave mid-way
    assert first[-1].stop_reason == "```\n"  # code ran after this turn: the fence closed it
    assert asyncio.run(collect(engine, request("demo-01", 0, 1)))[-1].stop_reason is None


def test_unrecorded_request_is_an_error_delta_not_an_exception():
    engine = ReplayEngine(pooled_repetitions([FIXTURE_RUN]), TimingModel(time_scale=0))
    for req in (request("nope", 0, 0), request("demo-01", 99, 0), request("demo-01", 0, 5)):
        deltas = asyncio.run(collect(engine, req))
        assert len(deltas) == 1 and deltas[0].finish_reason == "error"
        assert "nothing recorded" in deltas[0].error
    assert engine.running_requests() == 0


def test_cancelled_repetitions_are_not_served_and_runs_pool_in_order(tmp_path: Path):
    fixture = _fixture_module()
    second = fixture.build_run(tmp_path / "second", reps=3, seed=5)
    pooled = pooled_repetitions([FIXTURE_RUN, second])
    first_only = pooled_repetitions([FIXTURE_RUN])
    assert len(first_only["demo-03"]) == 7  # its last repetition was cancelled
    assert all(r.status != "cancelled" for reps in pooled.values() for r in reps)
    assert len(pooled["demo-01"]) == 8 + 3
    assert pooled["demo-01"][8] == read_log(second).finished()["demo-01"][0]


def test_timing_follows_the_recording_scaled():
    recorded = pooled_repetitions([FIXTURE_RUN])
    turn = recorded["demo-02"][1].turns[0]
    for timing, expected in ((TimingModel(), turn.duration_s), (TimingModel(time_scale=0.5), turn.duration_s / 2),
                             (TimingModel(tokens_per_s=10), turn.generated_tokens / 10)):
        sleep = RecordingSleep()
        asyncio.run(collect(ReplayEngine(recorded, timing, sleep), request("demo-02", 1, 0)))
        assert sum(sleep.calls) == pytest.approx(expected)
    sleep = RecordingSleep()
    asyncio.run(collect(ReplayEngine(recorded, TimingModel(time_scale=0), sleep), request("demo-02", 1, 0)))
    assert sleep.calls == []


def test_running_requests_counts_open_streams_and_leaving_early_closes_them():
    async def scenario() -> list[int]:
        gate = asyncio.Event()  # every timed pause waits here until released: no wall-clock races

        async def held(_seconds: float) -> None:
            await gate.wait()

        engine = ReplayEngine(pooled_repetitions([FIXTURE_RUN]), TimingModel(), held)
        seen = []
        async with contextlib.aclosing(engine.stream(request("demo-01", 0, 0))) as a, \
                contextlib.aclosing(engine.stream(request("demo-01", 1, 0))) as b:
            gate.set()
            await a.__anext__()
            await b.__anext__()
            seen.append(engine.running_requests())
        seen.append(engine.running_requests())
        gate.clear()
        task = asyncio.create_task(collect(engine, request("demo-02", 0, 0)))
        await asyncio.sleep(0)
        seen.append(engine.running_requests())
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        seen.append(engine.running_requests())
        return seen

    assert asyncio.run(scenario()) == [2, 0, 1, 0]


def test_open_replay_engine_reads_config_and_fails_clearly(tmp_path: Path):
    config = Config().replace({"engine.name": "replay", "engine.replay_from": [str(FIXTURE_RUN)],
                               "engine.replay_time_scale": 0})
    engine = asyncio.run(open_replay_engine(config))
    assert engine.tokenizer is None and engine.timing.time_scale == 0 and engine.available("demo-04") == 8
    with pytest.raises(ConfigError, match="replay_from"):
        asyncio.run(open_replay_engine(Config().replace({"engine.name": "replay"})))
    with pytest.raises(ConfigError, match="no run log"):
        asyncio.run(open_replay_engine(config.replace({"engine.replay_from": [str(tmp_path)]})))
    with pytest.raises(ConfigError, match="replay_time_scale"):
        config.replace({"engine.replay_time_scale": -1})


def test_problems_come_from_the_log():
    problems = problems_from_log(FIXTURE_RUN)
    assert [p.id for p in problems] == [f"demo-0{i}" for i in range(1, 7)]
    assert problems[0].text == "What is 17 + 25?" and problems[0].answer == "42"


def test_problems_from_a_log_without_problem_records_is_a_clear_error(tmp_path: Path):
    fixture = _fixture_module()
    with RunLog.create(tmp_path, Config()) as log:
        log.append(fixture.make_repetition("p", 0, "1", __import__("random").Random(0)))
    with pytest.raises(LogError, match="records no problems"):
        problems_from_log(tmp_path)


# ---- importer ---------------------------------------------------------------------------------------------


def test_import_one_sample_per_line(tmp_path: Path):
    summary = import_samples(DATA / "samples_nemo.jsonl", tmp_path / "run", Config())
    assert (summary.problems, summary.samples, summary.without_answer) == (2, 6, 1)
    records = read_log(tmp_path / "run")
    assert [(p.id, p.answer) for p in records.problems] == [("aime-1", "2"), ("aime-2", "24")]
    assert records.problems[1].text == "How many positive divisors does 360 have?"
    finished = records.finished()
    assert [r.answers[0].value if r.answers else None for r in finished["aime-2"]] == ["24", None, "24"]
    assert [r.generated_tokens for r in finished["aime-1"]] == [412, 388, 97]
    assert [r.index for r in finished["aime-1"]] == [0, 1, 2]
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["imported_from"].endswith("samples_nemo.jsonl")
    # an imported run replays: the recorded text comes back
    engine = ReplayEngine(pooled_repetitions([tmp_path / "run"]), TimingModel(time_scale=0))
    text = "".join(d.text for d in asyncio.run(collect(engine, request("aime-1", 2, 0))))
    assert text == "I think it is \\boxed{4}."


def test_import_list_valued_lines_and_text_only_answers(tmp_path: Path):
    import_samples(DATA / "samples_qwen.jsonl", tmp_path / "qwen", Config())
    records = read_log(tmp_path / "qwen")
    assert [(p.id, p.answer) for p in records.problems] == [("0", "42"), ("1", "55")]
    assert [r.answers[0].value for r in records.finished()["0"]] == ["42", "42", "48"]
    fields = SampleFields.with_overrides(answer="no_such_field")  # answers must come from the text
    import_samples(DATA / "samples_qwen.jsonl", tmp_path / "text", Config(), fields)
    assert [r.answers[-1].value for r in read_log(tmp_path / "text").finished()["1"]] == ["55", "56"]


@pytest.mark.parametrize("content, message", [
    ('{"problem_id": "a", "generation": "x"}\nnot json\n', "line 2: not valid JSON"),
    ('{"generation": "x", "expected_answer": "1"}\n', "line 1: no problem id"),
    ('{"id": "a", "predicted_answer": "1", "gt": "1"}\n{"id": "a", "predicted_answer": "1", "gt": "2"}\n',
     "two reference answers"),
    ('\n\n', "no samples"),
    ('[1, 2]\n', "expected a JSON object"),
    ('{"id": "a", "pred": ["1", "2"], "code": ["x"]}\n', "differ in length"),
])
def test_bad_sample_files_fail_clearly_and_leave_nothing(tmp_path: Path, content: str, message: str):
    source = tmp_path / "samples.jsonl"
    source.write_text(content)
    with pytest.raises(SampleImportError, match=message) as info:
        import_samples(source, tmp_path / "run", Config())
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["samples.jsonl"]


def test_import_cli_success_and_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert main(["import-samples", str(DATA / "samples_nemo.jsonl"), "--out", str(tmp_path / "run")]) == 0
    assert "imported 6 samples of 2 problems" in capsys.readouterr().out
    assert main(["import-samples", str(DATA / "samples_nemo.jsonl"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "already exists" in err and err.count("\n") == 1
    assert main(["import-samples", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "r2")]) == 2
    assert "cannot read" in capsys.readouterr().err
    assert not (tmp_path / "r2").exists()


# ---- token-id turns and recorded outputs ---------------------------------------------------------------------


def token_turn(ids: tuple[int, ...], text: str = "", execution=None) -> Turn:
    return Turn(text=text, prompt_tokens=7, generated_tokens=len(ids), finish_reason="stop", duration_s=0.0,
                execution=execution, token_ids=ids)


def test_a_turn_recorded_with_token_ids_streams_its_ids_in_pieces():
    ids = tuple(range(100, 140)) + (200012,)  # 41 ids, the last a stop token
    rep = Repetition("p", 0, 0, "done", (token_turn(ids, "x" * 40),), (), 0.0, 0.0)
    engine = ReplayEngine({"p": [rep]}, TimingModel(time_scale=0))
    req = GenerationRequest("p-r0-t0", "", (1,), 1000, 1.0, 1.0, 0, (), stop_token_ids=(200002, 200012),
                            problem_id="p")
    deltas = asyncio.run(collect(engine, req))
    assert [len(d.token_ids) for d in deltas] == [16, 16, 9]
    assert sum((d.token_ids for d in deltas), ()) == ids and "".join(d.text for d in deltas) == "x" * 40
    assert [d.finish_reason for d in deltas] == [None, None, "stop"] and deltas[-1].stop_token == 200012
    assert deltas[0].prompt_tokens == 7
    # the request's max_tokens comes first: the turn is cut there, as the engine would have cut it
    short = asyncio.run(collect(engine, replace(req, max_tokens=20)))
    assert sum((d.token_ids for d in short), ()) == ids[:20]
    assert short[-1].finish_reason == "length" and short[-1].stop_token is None


def test_recorded_calls_answer_each_call_with_the_turn_the_task_was_served():
    done = Execution("print(1)", "ok", "1\n", "", 0.5)
    rep = Repetition("p", 0, 0, "done", (token_turn((5, 200012), execution=done), token_turn((6, 200002))), (),
                     0.0, 0.0)
    engine = ReplayEngine({"p": [rep]}, TimingModel(time_scale=0))
    sandbox = RecordedCalls.of_turns(engine.recorded_execution)

    async def repetition() -> tuple[Execution, Execution]:
        before = await sandbox.run("print(1)")  # nothing served in this task yet
        await collect(engine, GenerationRequest("p-r0-t0", "", (1,), 10, 1.0, 1.0, 0, (), problem_id="p"))
        session = await sandbox.session()
        return before, await session.run("print(1)")

    before, after = asyncio.run(repetition())
    assert before.status == "error" and "no recorded output" in before.stderr
    assert after == done
    assert served() is None  # the mark stays in the task that was served


def test_recorded_calls_in_a_real_sandbox_sleep_there_and_keep_a_session_per_repetition():
    """The measurement wing's use (``solver.measure.recorded_calls`` over the plans): a recorded call sleeps its
    seconds in the real sandbox, cut under the timeout, and answers as recorded; any other call runs there as it is,
    each session its own stateful one."""
    from solver.sandbox.pool import create_sandbox

    recorded = Execution("# replayed call p/0/0", "ok", "42\n", "", 9.0)
    config = replace(Config().sandbox, workers=2, code_mode="stateful")

    async def scenario() -> list[Execution]:
        sandbox = create_sandbox(config)
        await sandbox.start()
        calls = RecordedCalls.in_sandbox(sandbox, lambda code: recorded if code == recorded.code else None,
                                         timeout_s=0.5)
        try:
            first, second = await calls.session(), await calls.session()
            try:
                return [await first.run(recorded.code), await first.run("x = 6 * 7\nprint(x)"),
                        await first.run("print(x)"), await second.run("print(x)")]
            finally:
                await first.close()
                await second.close()
        finally:
            await calls.close()

    answered, warm_up, same, other = asyncio.run(scenario())
    assert (answered.status, answered.stdout, answered.code) == ("ok", "42\n", recorded.code)
    assert 0.4 <= answered.duration_s < 9.0  # slept in the sandbox, cut just under its 0.5 s timeout
    assert (warm_up.stdout, same.stdout) == ("42\n", "42\n")  # not recorded: run as it is, state kept
    assert other.status == "error" and "NameError" in other.stderr  # another repetition's session


def test_recorded_outputs_need_the_replay_engine():
    with pytest.raises(ConfigError, match="engine.replay_outputs needs the replay engine"):
        Config().replace({"engine.replay_outputs": True})


def test_import_compressed_samples_and_refuse_a_trace_among_them(tmp_path: Path):
    import gzip

    source = tmp_path / "samples.jsonl.gz"
    with gzip.open(source, "wt") as handle:
        handle.write((DATA / "samples_nemo.jsonl").read_text())
    assert import_samples(source, tmp_path / "run", Config()).samples == 6
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"problem_id": "a", "generation": "x"}\n'
                     '{"problem_id": "a", "problem": "x", "prompt_ids": [1], "completion_ids": [2]}\n')
    with pytest.raises(SampleImportError, match="line 2: a token trace among samples"):
        import_samples(mixed, tmp_path / "run2", Config())
    assert not (tmp_path / "run2").exists()
