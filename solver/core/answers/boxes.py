"""Boxes: every closed ``\\boxed{...}`` / ``\\fbox{...}`` of a text, as raw spans, and a streamed text's first one.

Nothing here judges what a span means; :mod:`.normalisation` turns a span into a comparable value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.core.answers.limits import MAX_BOX_CHARS

BOX_OPEN = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])(\s*)")


@dataclass(frozen=True)
class Span:
    start: int  # offset of the candidate in the text, for ordering
    raw: str


def matching_brace(text: str, open_at: int, limit: int | None = None) -> int | None:
    """Offset of the ``}`` closing the ``{`` at ``open_at``, or None when the text (or ``limit`` characters)
    ends first.

    >>> matching_brace("{a{b}c}d", 0)
    6
    >>> matching_brace("{a{b}", 0) is None
    True
    """
    depth = 0
    i = open_at
    end = len(text) if limit is None else min(len(text), open_at + limit)
    while i < end:
        ch = text[i]
        if ch == "\\":  # an escaped brace \{ or \} does not count
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def find_boxes(text: str) -> list[Span]:
    """Every closed ``\\boxed{...}`` / ``\\fbox{...}`` (and the brace-less ``\\boxed 5``), in order.

    >>> [b.raw for b in find_boxes(r"\\boxed{1} \\fbox{\\frac{2}{3}} \\boxed 4$ \\boxed{5")]
    ['1', '\\\\frac{2}{3}', '4']

    A box left open for ``MAX_BOX_CHARS`` is skipped so that boxes after it still count.
    """
    return _scan_boxes(text)[0]


def _scan_boxes(text: str) -> tuple[list[Span], int]:
    """:func:`find_boxes`, and the offset from which a box not among them could still appear as the text grows:
    every box opening before it is settled for good (closed, skipped, or not a box), so a streamed text needs
    scanning again only from there (:class:`FinalAnswerWatch`).

    >>> _scan_boxes(r"so \\boxed{5")[1], _scan_boxes(r"\\boxed $x$ \\boxe")[1], _scan_boxes("abc")[1]
    (3, 11, 0)
    """
    out: list[Span] = []
    pos = 0
    while (m := BOX_OPEN.search(text, pos)) is not None:
        pos = m.end()
        if pos == len(text):
            return out, m.start()  # "\\boxed" at the end: a brace, a space or a token may follow
        if text.startswith("{", pos):
            close = matching_brace(text, pos, MAX_BOX_CHARS)
            if close is None and len(text) - pos < MAX_BOX_CHARS:
                return out, m.start()  # unclosed: the stream may still be growing
            if close is None:
                continue
            out.append(Span(m.start(), text[pos + 1 : close]))
            pos = close + 1
        elif m.group(1):  # "\\boxed 5": a space, then one token
            token = re.match(r"[^\s$\\{}]+", text[pos:])
            if token is not None:
                out.append(Span(m.start(), token.group()))
    # Any other opening would start in the last five characters, cut by the end ("\\boxe"); earlier ones
    # were searched and are not there.
    return out, max(pos, len(text) - len("\\boxe"))


def last_boxed(text: str) -> str | None:
    """Content of the last closed ``\\boxed{...}`` or ``\\fbox{...}``, braces matched.

    >>> last_boxed(r"so $\\boxed{\\frac{1}{2}}$ and finally \\boxed{7}.")
    '7'
    >>> last_boxed(r"\\boxed{\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> last_boxed(r"\\boxed{3} then \\boxed{4")
    '3'
    >>> last_boxed("no box here") is None
    True
    """
    boxes = find_boxes(text)
    return boxes[-1].raw if boxes else None


def has_final_answer(text: str) -> bool:
    """True when a closed box is present; cheap enough to call on every streamed delta.

    >>> has_final_answer(r"... \\boxed{12")
    False
    >>> has_final_answer(r"... \\boxed{12}")
    True
    """
    return ("\\boxed" in text or "\\fbox" in text) and bool(find_boxes(text))


class FinalAnswerWatch:
    """:func:`has_final_answer` of a text streamed piece by piece, asked at each piece holding a ``}`` (the
    only way a braced box completes), with O(1) amortised work per piece where calling it on the joined text
    costs the whole text each time: a closed box stays closed as the text grows, so once one is there the
    answer stays True, and before that only the text from the first unsettled box opening (at most
    ``MAX_BOX_CHARS`` and the pieces since the last check) is scanned again.

    With ``after``, only the text after the last occurrence of that marker counts (a dialect's final-answer
    channel); before the marker nothing does, and a new marker starts the counted text again.

    >>> watch = FinalAnswerWatch()
    >>> [watch.feed(p) for p in ("so \\\\box", "ed{\\\\frac{1}", "{2}", "}", " done", "}")]
    [False, False, False, True, False, True]
    >>> watch = FinalAnswerWatch(after="<final>")
    >>> [watch.feed(p) for p in (r"\\boxed{1}", "<fin", "al>", r"\\boxed{2}", "<final>x}")]
    [False, False, False, True, False]
    """

    def __init__(self, after: str | None = None) -> None:
        self.after = after
        self._pending: list[str] = []  # pieces since the last check
        self._tail = ""  # the counted text from the first unsettled box opening (see _scan_boxes)
        self._counting = after is None  # the marker has been seen (always, without one)
        self._carry = ""  # the last len(after) - 1 characters: a marker cut between pieces
        self._found = False

    def feed(self, piece: str) -> bool:
        """True when ``piece`` holds a ``}`` and the counted text so far holds a closed box."""
        self._pending.append(piece)
        if "}" not in piece:
            return False
        new = "".join(self._pending)
        self._pending.clear()
        if self.after is not None:
            seen = self._carry + new
            at = seen.rfind(self.after)
            self._carry = seen[max(0, len(seen) - len(self.after) + 1):]
            if at >= 0:
                self._counting, self._found, self._tail = True, False, ""
                new = seen[at + len(self.after):]
        if not self._counting or self._found:
            return self._found
        boxes, resume = _scan_boxes(self._tail + new)
        self._found = bool(boxes)
        self._tail = "" if self._found else (self._tail + new)[resume:]
        return self._found
