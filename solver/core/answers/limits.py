"""The bounds every candidate answer is held to: its size, its nesting, and the time grading may take.

They keep hostile or runaway text (a box never closed, a power tower, 200 nested brackets) from costing more
than a bounded amount of work, whatever a model writes.
"""

from __future__ import annotations

# Python refuses int() on strings over 4300 digits; an answer that long is not an answer anyway.
MAX_DIGITS = 4000
# A box still open this many characters after \boxed{ is not an answer being written but a stray command.
MAX_BOX_CHARS = 2000
# Longest canonical MATH-style answer kept (characters); longer candidates are prose, not answers.
MAX_ANSWER_CHARS = 300
# A \sum or \prod in an answer is expanded term by term up to this many terms.
MAX_TERMS = 200
# Expression answers nest brackets a few levels deep; deeper ones are not parsed (the parser slows steeply:
# 4 nested parentheses took 0.2 s on 2 loaded cores, 7 took 2 s, 140 took 6.6 s).
MAX_NESTING = 4
# math-verify gets at most this long (seconds) per comparison; its inputs are canonical answers, so at most
# MAX_ANSWER_CHARS characters each.
GRADE_TIMEOUT_S = 5.0
