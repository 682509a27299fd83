"""What the model is shown for one code run: the text every dialect puts in its tool message or output block.

Two styles, chosen by the preset (``prompt.output_style``):

- ``plain``: the run's output without its trailing newlines, or an error's last four lines, cut in the middle
  beyond ``prompt.output_chars`` (two thirds kept from the head).
- ``jupyter``: what a Jupyter kernel shows a harness that joins the streams the way the AIMO3 public harness did
  (``tonghuikang/aimo3``, ``notebook.py``: ``LocalJupyterSession.execute``): stdout and the last expression's
  ``text/plain`` first, then stderr and the traceback after ``stdout.rstrip() + "\\n"``; a run that showed nothing
  shows ``prompt.empty_output``; an interrupted one ends with ``prompt.timeout_output`` on a line of its own;
  beyond ``prompt.output_chars`` characters the middle is replaced by ``prompt.output_cut`` keeping
  ``prompt.output_keep`` characters at each end. Kept exactly, trailing newline included: the model was trained on
  this text, and the prefix cache needs the same tokens the recording had.

``execution_from_shown`` reads a recorded tool message back into an ``Execution`` that shows the same text again
(checked on every recorded tool output of the real attempts), so an imported attempt replays with its outputs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.config import PromptConfig
from solver.types import Execution

# IPython's ``%xmode Plain`` tracebacks: a runtime error opens with the header, a syntax error with its location.
_TRACEBACK = re.compile(r"^(?:Traceback \(most recent call last\):|  Cell In\[\d+\], line \d+\n|  File .+, line \d+\n)",
                        re.M)


@dataclass(frozen=True)
class OutputStyle:
    """How code runs are shown (the ``prompt.output_*`` keys)."""

    style: str = "plain"  # plain | jupyter
    max_chars: int = 600
    keep: int = 0  # characters kept at each end when cut; 0: two thirds at the head, the rest at the tail
    cut: str = "\n...\n"
    empty: str = ""
    timeout: str = "TimeoutError: the code ran too long"
    restarted: str = "(the Python session was restarted: names defined by earlier calls are gone)"

    @classmethod
    def from_config(cls, prompt: PromptConfig) -> OutputStyle:
        return cls(prompt.output_style, prompt.output_chars, prompt.output_keep, prompt.output_cut,
                   prompt.empty_output, prompt.timeout_output, prompt.restarted_output)

    def shorten(self, text: str) -> str:
        """The text, its middle replaced by ``cut`` when it is longer than ``max_chars``.

        >>> OutputStyle(max_chars=6).shorten("abcdefghij")
        'abcd\\n...\\nij'
        >>> OutputStyle(max_chars=8, keep=3, cut="(cut)").shorten("abcdefghij"), OutputStyle().shorten("short")
        ('abc(cut)hij', 'short')
        """
        if len(text) <= self.max_chars:
            return text
        head = self.keep or (self.max_chars * 2) // 3
        tail = self.keep or self.max_chars - head
        return text[:head] + self.cut + text[len(text) - tail:]


PLAIN = OutputStyle()


def describe_execution(execution: Execution, style: OutputStyle = PLAIN) -> str:
    """The text the model is shown for one code run.

    >>> ok = Execution("x", "ok", "42\\n", "", 0.01)
    >>> describe_execution(ok), describe_execution(ok, OutputStyle("jupyter", 12000))
    ('42', '42\\n')
    >>> jupyter = OutputStyle("jupyter", 12000, empty="[WARN] nothing", timeout="[TIMEOUT] interrupted.")
    >>> describe_execution(Execution("x = 1", "ok", "", "", 0.0), jupyter)
    '[WARN] nothing'
    >>> describe_execution(Execution("f()", "timeout", "1\\n2\\n", "Traceback ...\\nKeyboardInterrupt\\n", 6.0), jupyter)
    '1\\n2\\nTraceback ...\\nKeyboardInterrupt\\n[TIMEOUT] interrupted.'
    """
    if style.style == "jupyter":
        return _jupyter(execution, style)
    return _plain(execution, style)


def _plain(execution: Execution, style: OutputStyle) -> str:
    if execution.status == "timeout":
        body = (execution.stdout + "\n" if execution.stdout else "") + style.timeout
    elif execution.status == "memory":
        body = "MemoryError: the code used too much memory"
    elif execution.status in ("error", "killed"):
        lines = execution.stderr.strip().splitlines()
        body = "\n".join(lines[-4:]) if lines else f"the code failed ({execution.status})"
        if execution.stdout:
            body = execution.stdout.rstrip("\n") + "\n" + body
    elif execution.status == "cancelled":
        body = "the code was not run"
    else:
        body = execution.stdout.rstrip("\n")
    body = style.shorten(body)
    if execution.state_lost:
        body += "\n" + style.restarted
    return body


def _jupyter(execution: Execution, style: OutputStyle) -> str:
    out, err = execution.stdout, execution.stderr
    if execution.status == "cancelled":
        out, err = "", ""
    if err:
        out = f"{out.rstrip()}\n{err}" if out else err
    if execution.status == "timeout":
        out = f"{out.rstrip()}\n{style.timeout}".lstrip()
    elif not out.strip():
        out = style.empty
    out = style.shorten(out)
    if execution.state_lost:
        out = f"{out.rstrip()}\n{style.restarted}".lstrip()
    return out


def execution_from_shown(code: str, shown: str, style: OutputStyle, duration_s: float = 0.0) -> Execution:
    """An execution that ``describe_execution`` shows as ``shown`` in a jupyter ``style``: a recorded tool
    message read back. The status is what the text says (the timeout marker, a traceback, or ok); the text before
    a traceback is the output, the traceback stderr.

    >>> style = OutputStyle("jupyter", 12000, empty="[WARN] nothing", timeout="[TIMEOUT] interrupted.")
    >>> for shown in ("42\\n", "[WARN] nothing", "1\\nTraceback (most recent call last):\\n\\nKeyError: 0\\n",
    ...               "Traceback (most recent call last):\\n  ...\\nKeyboardInterrupt\\n[TIMEOUT] interrupted."):
    ...     e = execution_from_shown("f()", shown, style)
    ...     print(e.status, repr(e.stdout), describe_execution(e, style) == shown)
    ok '42\\n' True
    ok '' True
    error '1\\n' True
    timeout '' True
    """
    if style.style != "jupyter":
        raise ValueError("recorded outputs are read back in the jupyter style only")
    status = "ok"
    body = shown
    if shown == style.empty:
        body = ""
    elif style.timeout and (shown == style.timeout or shown.endswith("\n" + style.timeout)):
        status, body = "timeout", shown[: len(shown) - len(style.timeout)]
    out, err = body, ""
    match = _TRACEBACK.search(body)
    if match is not None:
        before = body[: match.start()]
        # describe joins ``out.rstrip() + "\n" + err``: split only where that join gives this text back.
        if before == "" or (before.endswith("\n") and not before[:-1].endswith(tuple(" \t\n\r\f\v"))):
            out, err = before, body[match.start():]
            status = "timeout" if status == "timeout" else "error"
    execution = Execution(code, status, out, err, duration_s)  # type: ignore[arg-type]
    if describe_execution(execution, style) != shown:
        # A text the rules above cannot split exactly (a shortened output, odd whitespace): keep it whole.
        execution = Execution(code, "ok" if status != "timeout" else status, shown if status != "timeout" else body,
                              "", duration_s)  # type: ignore[arg-type]
    return execution
