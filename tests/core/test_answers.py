"""Answer extraction, normalisation and grading against regression tables of model-like text."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from solver.core.answers import grade, normalisation
from solver.core.answers import (FinalAnswerWatch, code_answer, extract_answers, has_final_answer, is_correct,
                                 last_boxed, normalise)
from solver.config import AnswerConfig

DATA = Path(__file__).parents[1] / "data"


def _load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


EXTRACTION = _load("extraction_cases.jsonl")
GRADING = _load("grading_cases.jsonl")


@pytest.mark.parametrize("case", [c for c in EXTRACTION if c["kind"] == "text"], ids=lambda c: c["name"])
def test_extraction_table(case: dict) -> None:
    rules = AnswerConfig(**case["rules"])
    found = [[a.value, a.source] for a in extract_answers(case["text"], rules)]
    assert found == case["expected"]
    assert last_boxed(case["text"]) == case["last_boxed"]


@pytest.mark.parametrize("case", [c for c in EXTRACTION if c["kind"] == "code"], ids=lambda c: c["name"])
def test_code_output_table(case: dict) -> None:
    answer = code_answer(case["text"], AnswerConfig(**case["rules"]))
    assert (answer.value if answer else None) == case["expected"]
    if answer is not None:
        assert answer.source == "code"


@pytest.mark.parametrize("case", GRADING, ids=lambda c: f"{c['predicted']}~{c['reference']}")
def test_grading_table(case: dict) -> None:
    assert is_correct(case["predicted"], case["reference"], AnswerConfig(**case["rules"])) is case["correct"]


def test_tables_cover_the_required_shapes() -> None:
    texts = " ".join(c["text"] for c in EXTRACTION)
    for shape in [r"\boxed{\frac{1}{2}}", r"\boxed{1,000}", r"\boxed{042}", r"$\boxed{ 17 }$", "The answer is",
                  "**Final Answer** 34", "27.0", r"\dfrac", r"\text{", r"^\circ", r"\%", "-3"]:
        assert shape.lower() in texts.lower(), shape


def test_extracted_answers_are_their_own_normal_form() -> None:
    # A value fed back through normalise must not change: voting compares values directly.
    for case in EXTRACTION:
        rules = AnswerConfig(**case["rules"])
        if case["kind"] == "text":
            for a in extract_answers(case["text"], rules):
                assert normalise(a.value, rules) == a.value, case["name"]


def test_normalise_applies_modulus_before_range() -> None:
    aimo2 = AnswerConfig(modulus=1000, low=0, high=999)
    assert normalise("1999", aimo2) == "999"
    assert normalise("-1", aimo2) == "999"
    assert normalise("1999", AnswerConfig(high=999)) is None
    assert normalise("5", AnswerConfig(low=10, high=20)) is None


def test_normalise_rejects_absurdly_long_numbers_without_raising() -> None:
    assert normalise("9" * 5000, AnswerConfig(modulus=1000)) is None
    assert normalise("2^{100000}", AnswerConfig(modulus=1000)) is None


def test_has_final_answer_on_a_growing_stream() -> None:
    text = r"Let me compute. So the result is \boxed{1"
    assert not has_final_answer(text)
    assert has_final_answer(text + "2}")
    assert not has_final_answer("no box yet, answer is 12")


# Pieces that make boxes open, close, nest, escape, split between pieces, stay open past MAX_BOX_CHARS, and
# markers cut between pieces.
_STREAM_PIECES = ["\\boxed", "\\fbox", "\\boxe", "d", "ed", "{", "}", "}}", " ", "\n", "$", "\\", "x", "12",
                  "\\{", "\\}", "\\frac", "\\boxed{", "\\boxed ", "<final>", "<fin", "al>", "a" * 700, "b" * 1999]


@pytest.mark.parametrize("after", [None, "<final>"])
def test_final_answer_watch_says_what_has_final_answer_says_on_the_whole_text(after: str | None) -> None:
    """The streaming watch against the rule it replaces: at each piece with a "}", has_final_answer of all the
    text so far (after the last marker, with one)."""
    rng = random.Random(7)
    for _ in range(2000):
        text = "".join(rng.choice(_STREAM_PIECES) for _ in range(rng.randint(0, 40)))
        cuts = sorted(rng.sample(range(len(text) + 1), min(len(text) + 1, rng.randint(0, 30))))
        pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)])]
        watch, seen = FinalAnswerWatch(after), ""
        for piece in pieces:
            seen += piece
            at = 0 if after is None else seen.rfind(after)
            expected = "}" in piece and at >= 0 and has_final_answer(seen[at + len(after or ""):])
            assert watch.feed(piece) == expected, (pieces, piece)


def test_is_correct_integer_rules_never_call_math_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*_args: object) -> bool:
        raise AssertionError("math-verify called under integer rules")

    monkeypatch.setattr(grade, "_math_verify", fail)
    assert is_correct("1,000", "1000", AnswerConfig())
    assert not is_correct("x", "1000", AnswerConfig())


def test_is_correct_works_off_the_main_thread() -> None:
    # math-verify's own alarm-based timeouts raise off the main thread; ours are disabled there.
    results: list[bool] = []
    worker = threading.Thread(target=lambda: results.append(is_correct("0.5", r"\frac{2}{4}", AnswerConfig(integer=False))))
    worker.start()
    worker.join(30)
    assert results == [True]


def test_math_verify_overrun_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    import math_verify

    release = threading.Event()

    def slow_parse(*_args: object, **_kwargs: object) -> list:
        release.wait(10)
        return []

    monkeypatch.setattr(math_verify, "parse", slow_parse)
    start = time.monotonic()
    try:
        assert grade._math_verify("1", "2", timeout_s=0.2) is False
    finally:
        release.set()
    assert time.monotonic() - start < 2.0


HOSTILE = [r"2^{2^{2^{40}}}", r"\binom{10^{9}}{5 \cdot 10^{8}}", r"(10^{4000})!", r"\prod_{k=1}^{10^{9}} k",
           r"\sum_{k=1}^{10^{9}} k", r"10^{10^{10}} \bmod 7", "(" * 200 + "1" + ")" * 200, r"\sqrt[10^{9}]{2}",
           r"(10^{3000})^{10^{3000}}", r"\frac{1}{0}", r"0^{-1}", "(((((((1)))))))",
           r"\sum_{k=1}^{1000} k^{1000}"]


@pytest.mark.parametrize("expression", HOSTILE)
def test_hostile_expressions_are_refused_without_being_computed(expression: str) -> None:
    # Every step is bounded before it runs; the thread join turns a regression into a failure, not a hang.
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(normalise(expression, AnswerConfig(modulus=1000))),
                              daemon=True)
    worker.start()
    worker.join(20)
    assert got == [None]


def test_plain_integers_never_reach_the_expression_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(_s: str) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(normalisation, "evaluated", fail)
    for raw in ["42", "1,000", "27.0", "84/2", r"\frac{84}{2}", "2^{10}", "-2^2", "1.2e3", "n = 7", r"\$42"]:
        assert normalise(raw, AnswerConfig(low=-10)) is not None, raw


def test_a_length_cut_repetition_votes_no_phrase() -> None:
    from solver.core.answers import voting_answers
    from solver.types import Answer

    found = (Answer("3", "3", "boxed"), Answer("7", "7", "phrase"), Answer("9", "9", "code"))
    assert [a.source for a in voting_answers(found, "length")] == ["boxed", "code"]
    assert voting_answers(found, "done") == found
