"""Prompt templates (data files in ``prompts/``) and what the model is shown for a code run.

How a conversation is rendered to tokens, and where code and answers are found in it, is a dialect's business
(``solver/dialects``); the texts themselves are data here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from solver.config import ConfigError
from solver.types import Execution


def prompt_dirs() -> list[Path]:
    """Where templates live: packaged inside the wheel, or the repository's top-level ``prompts/``."""
    package = Path(__file__).resolve().parents[1]  # solver/
    return [package / "prompts", package.parent / "prompts"]


def template_names() -> list[str]:
    return sorted({p.stem for d in prompt_dirs() if d.is_dir() for p in d.glob("*.yaml")})


@dataclass(frozen=True)
class Template:
    name: str
    system: str
    user: str
    output: str

    @classmethod
    def load(cls, name: str) -> Template:
        for directory in prompt_dirs():
            path = directory / f"{name}.yaml"
            if path.is_file():
                data = yaml.safe_load(path.read_text())
                missing = {"system", "user", "output"} - set(data or {})
                if missing:
                    raise ConfigError(f"prompt template {path} lacks {sorted(missing)[0]!r}")
                return cls(name, data["system"], data["user"], data["output"])
        raise ConfigError(f"unknown prompt template {name!r} (choose from {', '.join(template_names())})")


def truncate_middle(text: str, limit: int) -> str:
    """Keep the head and the tail of a long output: the head shows the shape, the tail the final values.

    >>> truncate_middle("abcdefghij", 6)
    'abcd\\n...\\nij'
    >>> truncate_middle("short", 10)
    'short'
    """
    if len(text) <= limit:
        return text
    head = (limit * 2) // 3
    return text[:head] + "\n...\n" + text[len(text) - (limit - head):]


def describe_execution(execution: Execution, limit: int) -> str:
    """What the model is shown for one code run: its output, or the error's last lines."""
    if execution.status == "timeout":
        body = (execution.stdout + "\n" if execution.stdout else "") + "TimeoutError: the code ran too long"
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
    body = truncate_middle(body, limit)
    if execution.state_lost:
        body += "\n" + STATE_LOST
    return body


# Told after a call whose stateful session had to be killed and restarted empty.
STATE_LOST = "(the Python session was restarted: names defined by earlier calls are gone)"
