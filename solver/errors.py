"""What a failure means to the person running the solver: bad input they can fix (exit code 2) or a run that
started and could not finish (exit code 1), and the one line that says it. The CLI maps them to exit codes in one
place (``solver.cli.main``); every error class meant for the user derives from one of the two."""

from __future__ import annotations


class BadInput(Exception):
    """Input the user can fix before anything heavy starts: a file, a flag, a name, a path (exit code 2)."""


class ConfigError(BadInput, ValueError):
    """A configuration that cannot run; the message is one line meant for the user."""


class RunFailed(Exception):
    """A run that started and could not finish (exit code 1)."""


def first_line(exc: BaseException) -> str:
    """The first line of the message, or the exception's type when it has none.

    >>> first_line(ValueError("bad\\nthing")), first_line(KeyError())
    ('bad', 'KeyError')
    """
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def describe(exc: BaseException) -> str:
    """The exception's type and first line, for a failure that is not one of ours.

    >>> describe(ValueError("bad\\nthing")), describe(KeyError())
    ('ValueError: bad', 'KeyError')
    """
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
