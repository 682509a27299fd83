"""The rehearsal gateway (used where kaggle_evaluation is not at hand) calls predict as the real gateways do:
the row's columns as polars Series, shuffled, no deadline on the first call and the per-call limit after."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import polars as pl
from kaggle_doubles import FaultyScriptedEngine, fast_config, scripted_factory

from solver.kaggle.competition import competition
from solver.kaggle.predictor import KagglePredictor, PredictorOptions
from solver.measure.rehearsal import rehearse


def _data(tmp_path: Path, rows: dict[str, list[str]]) -> Path:
    path = tmp_path / "test.csv"
    pl.DataFrame(rows).write_csv(path)
    return path


def test_rehearsal_passes_the_rows_columns_shuffled_as_the_aimo2_gateway_does(tmp_path: Path) -> None:
    data = _data(tmp_path, {"id": [f"p{i}" for i in range(8)], "problem": [f"q{i}?" for i in range(8)]})
    seen: list[tuple[Any, ...]] = []

    def predict(*args: Any, **kwargs: Any) -> pl.DataFrame:
        assert not kwargs
        seen.append(tuple((type(a).__name__, a.name, a.to_list()) for a in args))
        return pl.DataFrame({"id": [args[0].item(0)], "answer": [5]})

    rehearsal = rehearse(predict, data, tmp_path / "out", comp=competition("aimo2"), seed=3)
    assert rehearsal.faults == []
    assert all([(t, n) for t, n, _ in call] == [("Series", "id"), ("Series", "question")] for call in seen)
    order = [call[0][2][0] for call in seen]
    assert sorted(order) == [f"p{i}" for i in range(8)] and order != sorted(order), "shuffled"
    assert [c.limit_s for c in rehearsal.calls] == [None] + [1800.0] * 7
    submission = pl.read_parquet(tmp_path / "out" / "submission.parquet")
    assert submission["id"].to_list() == order and submission["answer"].dtype == pl.Int64


def test_scripted_predictor_rehearsal_writes_the_submission(tmp_path: Path) -> None:
    data = _data(tmp_path, {"id": ["a", "b", "c"], "problem": ["x?", "y?", "z?"], "answer": ["42", "42", "7"]})
    factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer")])
    predict = KagglePredictor(fast_config(), "aimo2", PredictorOptions(open_session=factory))
    try:
        rehearsal = rehearse(predict, data, tmp_path / "out", comp=competition("aimo2"), seed=3)
    finally:
        predict.close()
    assert rehearsal.faults == [] and rehearsal.score == (2, 3)
    submission = pl.read_parquet(tmp_path / "out" / "submission.parquet")
    assert sorted(submission["id"].to_list()) == ["a", "b", "c"] and submission["answer"].dtype == pl.Int64
    assert (tmp_path / "out" / "submission.csv").read_text().startswith("id,answer\n")
    assert "score: 2/3" in (tmp_path / "out" / "report.md").read_text()


def test_rehearsal_records_a_predict_that_raises_or_answers_out_of_range(tmp_path: Path) -> None:
    data = _data(tmp_path, {"id": ["a", "b"], "problem": ["x?", "y?"]})

    def predict(id_: pl.Series, problem: pl.Series) -> pl.DataFrame:
        if id_.item(0) == "a":
            raise RuntimeError("boom")
        return pl.DataFrame({"id": ["b"], "answer": [123456]})

    rehearsal = rehearse(predict, data, tmp_path / "out", comp=competition("aimo3"))
    assert sorted(rehearsal.faults) == ["a: predict raised RuntimeError: boom", "b: answer 123456 is outside 0..99999"]


def test_rehearsal_ends_at_a_call_past_the_per_call_limit_as_the_gateway_does(tmp_path: Path) -> None:
    data = _data(tmp_path, {"id": ["a", "b", "c"], "problem": ["x?", "y?", "z?"]})
    comp = dataclasses.replace(competition("aimo3"), call_limit_s=0.3)
    calls: list[str] = []

    def predict(id_: pl.Series, problem: pl.Series) -> pl.DataFrame:
        calls.append(id_.item(0))
        time.sleep(0.6)  # over the limit; only the first call has none
        return pl.DataFrame({"id": [id_.item(0)], "answer": [1]})

    t0 = time.monotonic()
    rehearsal = rehearse(predict, data, tmp_path / "out", comp=comp)
    assert time.monotonic() - t0 < 1.5, "the second call was not waited for past its limit"
    assert len(rehearsal.calls) == 2 and len(calls) == 2, "no call after the one that overran"
    assert rehearsal.calls[0].fault is None and rehearsal.calls[1].fault == "no answer within the 0.3 s per-call limit"
    assert rehearsal.failure and any(f.startswith("gateway: no answer") for f in rehearsal.faults)
    assert pl.read_parquet(tmp_path / "out" / "submission.parquet").height == 1
