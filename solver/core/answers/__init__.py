"""Answers: find candidates in model text and code output, bring them to one comparable form, grade them.

- :mod:`.boxes`: every closed box of a text, as raw spans; :class:`FinalAnswerWatch` tells a streamed text's
  first closed box.
- :mod:`.phrases`: where text states its answer in words ("the answer is 12", "Final Answer: ...", "Answer $9$"),
  as raw spans, and the maths delimiters answers are written in.
- :mod:`.conclusions`: which phrases and lines conclude a text (a supposition or a number mid-derivation does
  not), and the bare final line or concluding sentence of a text with no box and no phrase.
- :mod:`.normalisation`: a raw span to the value votes compare (an integer under olympiad rules, canonical LaTeX
  under MATH-style rules).
- :mod:`.exact`: integer-valued LaTeX evaluated exactly, every step bounded before it runs.
- :mod:`.candidates`: the answers a repetition offers (text and code output) and which of them may vote.
- :mod:`.grade`: whether a prediction is the reference answer.
- :mod:`.limits`: the bounds on size, nesting and grading time.

Callers import from here: ``from solver.core.answers import extract_answers``.
"""

from __future__ import annotations

from solver.core.answers.boxes import FinalAnswerWatch, has_final_answer, last_boxed
from solver.core.answers.candidates import code_answer, extract_answers, voting_answers
from solver.core.answers.conclusions import CONCLUSION_CHARS
from solver.core.answers.exact import prepare_expressions
from solver.core.answers.grade import is_correct
from solver.core.answers.limits import (GRADE_TIMEOUT_S, MAX_ANSWER_CHARS, MAX_BOX_CHARS, MAX_DIGITS, MAX_NESTING,
                                        MAX_TERMS)
from solver.core.answers.normalisation import normalise

__all__ = ["CONCLUSION_CHARS", "GRADE_TIMEOUT_S", "MAX_ANSWER_CHARS", "MAX_BOX_CHARS", "MAX_DIGITS", "MAX_NESTING",
           "MAX_TERMS", "FinalAnswerWatch", "code_answer", "extract_answers", "has_final_answer", "is_correct",
           "last_boxed", "normalise", "prepare_expressions", "voting_answers"]
