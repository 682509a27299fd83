"""Answers as models write them, against rows from three sources, each table named after its source:

- ``extraction_cases_mathverify.jsonl``: written for this project, each row mirroring one case of Math-Verify's
  ``tests/`` (named in ``mirrors``; its texts are not copied): the shapes of Qwen-, DeepSeek- and few-shot base
  model outputs that its authors collected;
- ``extraction_cases_gptoss120b.jsonl``: references (position, problem id, source, request, message) into the
  real gpt-oss-120b attempts, whose text is read from ../shared at run time and never stored here;
- ``extraction_cases_pot_aqua.jsonl``: references (problem id, sample) into PoT AQuA's programs
  (``benchmarks/data/pot_aqua_dev.jsonl.gz``).

``evaluation/mathverify_agreement.py`` measures the agreement with Math-Verify's own verdicts and
``evaluation/answers_unchanged.py`` what a change of the rules changes on the whole of both corpora.
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path

import pytest

from solver.config import AnswerConfig
from solver.core.answers import extract_answers, normalise, voting_answers
from solver.core.answers.conclusions import concluding_sentence, final_line
from solver.core.voting import text_answer
from solver.types import Repetition

DATA = Path(__file__).parents[1] / "data"
POT = Path(__file__).parents[2] / "benchmarks" / "data" / "pot_aqua_dev.jsonl.gz"


def _load(name: str) -> list[dict]:
    return [json.loads(line) for line in (DATA / name).read_text().splitlines() if line.strip()]


MATHVERIFY = _load("extraction_cases_mathverify.jsonl")
GPTOSS = _load("extraction_cases_gptoss120b.jsonl")
POT_ROWS = _load("extraction_cases_pot_aqua.jsonl")


def _found(text: str, rules: AnswerConfig) -> list[list[str]]:
    return [[a.value, a.source] for a in extract_answers(text, rules)]


@pytest.mark.parametrize("case", MATHVERIFY, ids=lambda c: f"{c['mirrors']} {c['name']}")
def test_rows_mirroring_mathverify(case: dict) -> None:
    rules = AnswerConfig(**case["rules"])
    found = extract_answers(case["text"], rules)
    assert [[a.value, a.source] for a in found] == case["expected"]
    for answer in found:  # votes compare values directly: a value is its own normal form
        assert normalise(answer.value, rules) == answer.value


def test_mathverify_rows_cover_every_family() -> None:
    """Each family the extraction once missed has rows: bare final lines, "Answer <math>", "Final Answer:" before a
    sentence, a concluding sentence, a phrase after an intermediate box, a comma list."""
    names = " | ".join(c["name"] for c in MATHVERIFY)
    for family in ["a bare negative number", "Answer before inline maths", "Final Answer: a short sentence",
                   "a concluding sentence", "supersedes intermediate boxes", "list two numbers",
                   "inline $ maths does not run over lines", "a one-number equation"]:
        assert family in names, family
    assert len({c["mirrors"] for c in MATHVERIFY}) == len(MATHVERIFY)


def test_a_concluding_phrase_after_the_last_box_is_what_the_repetition_votes() -> None:
    text = r"So $\boxed{120}$ first, then $\boxed{35}$ more. The final answer is $155$. I hope it is correct."
    rep = Repetition("p", 0, 0, "done", (), extract_answers(text, AnswerConfig()), 0.0, 0.0)
    voted = text_answer(rep)
    assert voted is not None and voted.value == "155"


def test_a_box_restated_by_the_conclusion_still_votes_as_a_box() -> None:
    found = extract_answers(r"Hence $\boxed{42}$. The answer is 42.", AnswerConfig())
    assert [(a.value, a.source) for a in found] == [("42", "boxed"), ("42", "phrase")]


@pytest.mark.parametrize("text", ["We count the cases.\n\n17", "Each divisor gives one. Therefore, there are 17 ways.",
                                  "Final Answer: The largest $n$ is 17."])
def test_a_length_cut_repetition_votes_no_final_line_or_sentence(text: str) -> None:
    # A repetition cut by length never concluded: its last number is where it stopped, not its answer.
    found = extract_answers(text, AnswerConfig())
    assert [a.value for a in found] == ["17"]
    assert voting_answers(found, "length") == ()
    assert voting_answers(found, "done") == found


@pytest.mark.parametrize("text", [
    "We now check the case $n = 12$ by hand. It works, and the next case is 13.",  # no conclusion word
    "Suppose the count is 5. Then the sum would be odd.",  # a supposition
    "Thus reduce M modulo 1009.",  # an instruction, no copula
    "So if the total is 12, we are done.",  # a condition
    "Thus there are 3 or 4 of them.",  # two values
    "Let x = 5.\n\nx = 7",  # an undelimited equation line is code or prose, not an answer
    "Is it $12$?\n\nMaybe.",
])
def test_a_number_in_a_sentence_that_does_not_conclude_stays_out(text: str) -> None:
    assert extract_answers(text, AnswerConfig()) == ()


HOSTILE = ["$2^{2^{2^{40}}}$", "Answer $(((((((1)))))))$",
           r"Final Answer: The value is $\binom{10^{9}}{5 \cdot 10^{8}}$.",
           r"Therefore, the total is $\prod_{k=1}^{10^{9}} k$.", r"\[ 10^{10^{10}} \bmod 7 \]", "9" * 5000]


@pytest.mark.parametrize("text", HOSTILE, ids=range(len(HOSTILE)))
def test_hostile_final_lines_are_refused_without_being_computed(text: str) -> None:
    # The new places an answer is read from pass through the same bounded normalisation; the thread join turns
    # a regression into a failure, not a hang.
    got: list[object] = []
    worker = threading.Thread(target=lambda: got.append(extract_answers(text, AnswerConfig(modulus=1000))),
                              daemon=True)
    worker.start()
    worker.join(20)
    assert got == [()]


# ---- the real gpt-oss-120b attempts (read from ../shared at run time) ------------------------------------------


def _messages(attempt, request: int) -> list:
    from openai_harmony import Role

    from solver.dialects.harmony import load_encoding

    ids = list(attempt.requests[request].generated)
    return load_encoding().parse_messages_from_completion_tokens(ids, Role.ASSISTANT, strict=False)


@pytest.mark.parametrize("row", GPTOSS, ids=lambda r: f"attempt {r['attempt']} request {r['request']}: {r['why']}")
def test_rows_of_the_real_gptoss_attempts(row: dict, real_attempts) -> None:
    from solver.dialects.harmony import message_text

    attempt = real_attempts[row["attempt"]]
    assert (attempt.problem_id, attempt.source) == (row["problem_id"], row["source"])
    message = _messages(attempt, row["request"])[row["message"]]
    assert message.channel == row["channel"]
    assert _found(message_text(message), AnswerConfig()) == row["expected"]


def test_every_real_final_message_that_is_one_number_gives_it(real_attempts) -> None:
    """gpt-oss sometimes answers in its final channel with the number alone (bare, after ``\\displaystyle`` in
    inline maths, or in a display block): each such message gives that number and nothing else."""
    import re

    from solver.dialects.harmony import message_text

    seen = 0
    for attempt in real_attempts:
        for r, request in enumerate(attempt.requests):
            if not request.generated or request.end == "call":
                continue
            for message in _messages(attempt, r):
                text = message_text(message).strip()
                number = re.fullmatch(r"(?:\\\(\\displaystyle\s*|\\\[\s*)?(\d+)\s*(?:\\\)|\\\])?", text)
                if message.channel != "final" or number is None:
                    continue
                seen += 1
                assert _found(text, AnswerConfig()) == [[str(int(number.group(1))), "phrase"]], text
    assert seen == 31  # in the recorded file, every one ended by <|return|>


# ---- PoT AQuA (shipped in benchmarks/data) ---------------------------------------------------------------------


def _pot_programs() -> dict[tuple[str, int], str]:
    with gzip.open(POT, "rt") as f:
        return {(s["problem_id"], s["sample"]): s["generation"] for s in map(json.loads, f) if s}


@pytest.fixture(scope="module")
def pot_programs() -> dict[tuple[str, int], str]:
    return _pot_programs()


@pytest.mark.parametrize("row", POT_ROWS, ids=lambda r: f"{r['problem_id']} sample {r['sample']}")
def test_rows_of_pot_aqua_programs(row: dict, pot_programs) -> None:
    assert _found(pot_programs[(row["problem_id"], row["sample"])], AnswerConfig()) == row["expected"]


def test_no_pot_program_is_read_as_a_final_line_or_a_concluding_sentence(pot_programs) -> None:
    # 48 of the 2,640 programs end in an assignment of a number ("ans = 10"): code, not an answer line.
    read = [key for key, program in pot_programs.items()
            if final_line(program) is not None or concluding_sentence(program) is not None]
    assert read == []
