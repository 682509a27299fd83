"""Session cells run and shown as an IPython kernel runs and shows them (``sandbox.display: ipython``).

IPython's own ``InteractiveShell`` runs each call, so what the model sees is IPython's, not an imitation: cells are
numbered by the execution count (``Cell In[N], line L`` in tracebacks, a starter cell counting as one), the last
statement is shown when it is an expression (``last_expr``), unless its value is None or the cell ends in ``;``,
through IPython's display formatter (its pretty printer: ``defaultdict(list, {...})``, long lists wrapped one item
a line), tracebacks and syntax errors in the ``%colors NoColor`` / ``%xmode Plain`` layout, a namespace that starts
as a kernel's (``In``, ``Out``, ``_``, ``get_ipython``; no preamble names).

What a kernel publishes goes to the call's pipes the way the AIMO3 public harness joined its messages
(``tonghuikang/aimo3``, ``notebook.py``, ``LocalJupyterSession.execute``): stream stdout and every value's
``text/plain`` (a newline added when it has none) on stdout; stream stderr and each traceback's lines joined by
newlines on stderr. ``prepare`` builds the shell in the template before it forks (importing IPython there once,
~0.12 s, and building the shell, ~0.03 s); every session process owns a copy. This module is imported only when the
display is ``ipython``.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any

from IPython.core.displayhook import DisplayHook
from IPython.core.displaypub import DisplayPublisher
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config

from .snippet import HERE, Outcome

# Run once in the template after the shell is built, output discarded, then the shell is reset: the first value
# shown and the first traceback load and compile IPython's lazy parts (~6 and ~8 ms), once instead of per session.
WARMUP = ("_warm = [1] * 40\n_warm", "1 / 0", "def _warm(:")


def _publish_plain(data: dict[str, Any]) -> None:
    """A value's ``text/plain`` as the harness appended it: with a newline at the end."""
    text = data.get("text/plain")
    if text is not None:
        sys.stdout.write(text if text.endswith("\n") else f"{text}\n")


class PipeDisplayHook(DisplayHook):
    """A kernel's ``execute_result``: the value's ``text/plain`` alone, no ``Out[N]:`` prompt."""

    def write_output_prompt(self) -> None:
        pass

    def write_format_data(self, format_dict: dict[str, Any], md_dict: dict[str, Any] | None = None) -> None:
        _publish_plain(format_dict)

    def finish_displayhook(self) -> None:
        sys.stdout.flush()
        self._is_active = False


class PipeDisplayPublisher(DisplayPublisher):
    """A kernel's ``display_data`` (``display(x)``): its ``text/plain``, as the harness kept it."""

    def publish(self, data: dict[str, Any], metadata: dict[str, Any] | None = None, *args: Any,
                **kwargs: Any) -> None:
        _publish_plain(data)


class KernelShell(InteractiveShell):
    """IPython's shell, publishing to the call's pipes as a kernel publishes to its frontend."""

    displayhook_class = PipeDisplayHook
    display_pub_class = PipeDisplayPublisher

    def _showtraceback(self, etype: type[BaseException], evalue: BaseException, stb: list[str]) -> None:
        # A kernel sends the traceback's lines as one error message; the harness joined them with newlines.
        sys.stdout.flush()
        sys.stderr.write("\n".join(stb))
        sys.stderr.flush()

    def _get_exc_info(self, exc_tuple: Any = None) -> tuple[Any, Any, Any]:
        etype, value, tb = super()._get_exc_info(exc_tuple)
        _drop_runner_frames(tb)
        return etype, value, tb


def _drop_runner_frames(tb: TracebackType | None) -> None:
    """Cut the session's interrupt handler (the frame that raised KeyboardInterrupt at the limit) off the end of a
    traceback: a kernel's interrupt is raised by a C handler, which shows no frame."""
    last, entry = None, tb
    while entry is not None and entry.tb_next is not None:
        last, entry = entry, entry.tb_next
    if last is not None and entry is not None and os.path.dirname(entry.tb_frame.f_code.co_filename) == HERE:
        last.tb_next = None


def prepare() -> None:
    """Build the shell in the calling process (the template, before it forks), with the harness's settings: no
    history (it would start a thread, and the harness's kernels ran without it), ``%colors NoColor`` and
    ``%xmode Plain``. Then warm it up and reset it to a new session (execution count 1, a kernel's namespace)."""
    config = Config()
    config.HistoryManager.enabled = False
    shell = KernelShell.instance(config=config)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        shell.run_line_magic("colors", "NoColor")
        shell.run_line_magic("xmode", "Plain")
        for cell in WARMUP:
            shell.run_cell(cell, store_history=False)
    shell.reset(new_session=True)
    for name in ("last_type", "last_value", "last_traceback"):
        if hasattr(sys, name):
            delattr(sys, name)  # the warm-up's error: a session starts without one


class KernelCells:
    """A session's cells through the shell ``prepare`` built (this process's copy of it)."""

    def __init__(self) -> None:
        if not KernelShell.initialized():
            prepare()  # not built ahead (a template that was not told): build it here, slower
        self.shell = KernelShell.instance()

    def run(self, code: str, repl: bool, guard: AbstractContextManager[object]) -> Outcome:
        """Run one cell as a kernel's execute request (``store_history``: it takes the next execution count)."""
        self.shell.ast_node_interactivity = "last_expr" if repl else "none"
        with guard:
            result = self.shell.run_cell(code, store_history=True)
        error = result.error_before_exec or result.error_in_exec
        if error is None or (isinstance(error, SystemExit) and error.code in (None, 0)):
            return "ok"  # sys.exit(0) ends a cell cleanly, as in the repr runner (IPython still shows its note)
        return "memory" if isinstance(error, MemoryError) else "error"
