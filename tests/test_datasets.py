"""Loaders for CSV and JSONL problem sets, on small files written here and on the public sets when present."""

from __future__ import annotations

from pathlib import Path

import pytest

from solver.datasets import DatasetError, dataset_names, load_problems

SHARED = Path("/work/shared/data")


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_demo_set_is_bundled_with_integer_answers_and_unique_ids() -> None:
    problems = load_problems(dataset_names()["demo"])
    assert 6 <= len(problems) <= 12
    assert [p.id for p in problems][:2] == ["demo-01", "demo-02"]
    assert all(p.answer is not None and p.answer.isdigit() for p in problems)
    assert load_problems("demo") == problems  # a bundled set also loads by name


def test_csv_extra_columns_become_meta_and_answer_is_optional(tmp_path: Path) -> None:
    path = write(tmp_path, "set.csv", 'id,problem,level\na1,"What is 1+1,\nreally?",3\na2,Sum 2 and 2.,1\n')
    problems = load_problems(path)
    assert problems[0].text == "What is 1+1,\nreally?"
    assert problems[0].answer is None
    assert problems[0].meta == {"subset": "set", "level": "3"}
    assert load_problems(path, limit=1) == problems[:1]


def test_csv_with_byte_order_mark_and_answer_column(tmp_path: Path) -> None:
    path = tmp_path / "ref.csv"
    path.write_bytes("\ufeffid,problem,answer\nx,Find x.,12\ny,Find y.,\n".encode())
    problems = load_problems(path)
    assert [(p.id, p.answer) for p in problems] == [("x", "12"), ("y", None)]


def test_jsonl_numbers_ids_and_question_key(tmp_path: Path) -> None:
    path = write(tmp_path, "amc.jsonl",
                 '{"id": 7, "question": "Q?", "answer": 27.0, "url": "u"}\n\n{"problem": "P?", "answer": 2.5}\n')
    problems = load_problems(path)
    assert [(p.id, p.text, p.answer) for p in problems] == [("7", "Q?", "27"), ("1", "P?", "2.5")]
    assert problems[0].meta == {"subset": "amc", "url": "u"}


def test_jsonl_gsm8k_worked_solution_gives_final_number(tmp_path: Path) -> None:
    path = write(tmp_path, "gsm.jsonl", '{"question": "Q", "answer": "3 * 500 = 1500\\n#### 1,500", "idx": 4}\n')
    (problem,) = load_problems(path)
    assert (problem.id, problem.answer) == ("4", "1500")


def test_jsonl_math_latex_answer_kept_and_level_in_meta(tmp_path: Path) -> None:
    path = write(tmp_path, "m.jsonl", '{"problem": "p", "answer": "\\\\frac{1}{2}", "level": 5, "subject": "Algebra",'
                                      ' "type": "Algebra", "unique_id": "test/a/1.json", "solution": "long"}\n')
    (problem,) = load_problems(path)
    assert problem.answer == "\\frac{1}{2}"
    assert problem.id == "test/a/1.json"
    assert problem.meta == {"subset": "m", "level": "5", "subject": "Algebra", "type": "Algebra"}


@pytest.mark.parametrize(("name", "text", "message"), [
    ("a.txt", "id,problem\n1,x\n", "unknown extension '.txt'"),
    ("a.csv", "id,question\n1,x\n", "missing column 'problem'"),
    ("a.csv", "id,problem\n1,x,extra\n", "line 2: 3 fields, expected 2"),
    ("a.csv", "id,problem\n1,  \n", "line 2: empty problem text"),
    ("a.csv", "id,problem\n1,x\n1,y\n", "line 3: duplicate id '1' (first on line 2)"),
    ("a.csv", "", "empty file"),
    ("a.csv", "id,problem\n", "no problems"),
    ("a.jsonl", '{"problem": "x"}\n{"problem": "y"\n', "line 2: not JSON"),
    ("a.jsonl", '[1, 2]\n', "line 1: expected a JSON object"),
    ("a.jsonl", '{"text": "x"}\n', "line 1: missing 'problem' or 'question'"),
    ("a.jsonl", '{"problem": "x", "answer": [1]}\n', "line 1: 'answer' must be text or a number"),
    ("a.jsonl", '{"id": 1, "problem": "x"}\n{"id": 1.0, "problem": "y"}\n', "line 2: duplicate id '1'"),
])
def test_bad_files_give_one_line_error_naming_the_file(tmp_path: Path, name: str, text: str, message: str) -> None:
    path = write(tmp_path, name, text)
    with pytest.raises(DatasetError) as caught:
        load_problems(path)
    assert message in str(caught.value)
    assert str(path) in str(caught.value)
    assert "\n" not in str(caught.value)


def test_missing_or_undecodable_file_and_bad_limit(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file or bundled set"):
        load_problems(tmp_path / "absent.csv")
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"id,problem\n1,\xff\xfe\n")
    with pytest.raises(DatasetError, match="cannot read"):
        load_problems(binary)
    with pytest.raises(DatasetError, match="limit must be at least 1"):
        load_problems("demo", limit=0)


@pytest.mark.skipif(not SHARED.is_dir(), reason="public sets not present on this machine")
@pytest.mark.parametrize(("name", "count", "first_id", "first_answer"), [
    ("aime24", 30, "60", "204"),
    ("amc23", 40, "0", "27"),
    ("math500", 500, "test/precalculus/807.json", "\\left( 3, \\frac{\\pi}{2} \\right)"),
    ("gsm8k_test", 1319, "0", "18"),
])
def test_public_sets_load(name: str, count: int, first_id: str, first_answer: str) -> None:
    problems = load_problems(SHARED / f"{name}.jsonl")
    assert len(problems) == count
    assert (problems[0].id, problems[0].answer) == (first_id, first_answer)
    assert all(p.answer for p in problems)
