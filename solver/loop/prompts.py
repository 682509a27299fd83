"""Prompt templates (data files in ``prompts/``), chat rendering, code-block parsing and tool-output rendering.

A repetition's prompt grows by appending: the first request is the chat-rendered problem; each later request is
the previous prompt plus what the model generated plus the rendered tool output. Token ids grow the same way
(generated ids are reused as returned, only the appended output is tokenised), so no turn re-tokenises the whole
prompt and vLLM's prefix cache sees an exact prefix.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from solver.config import ConfigError
from solver.types import Execution, Problem, Tokenizer

CODE_STOP = "```\n"  # generation pauses when a fenced block closes; the loop decides whether it was python
STOP_STRINGS: tuple[str, ...] = (CODE_STOP, "```output")  # a model may start writing the output itself

_PYTHON_OPEN = re.compile(r"```(?:python|py)[ \t]*\n", re.IGNORECASE)


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


def open_python_block(text: str) -> str | None:
    """The code of the last ```python block in ``text`` that has no closing fence yet, else None.

    >>> open_python_block("Let me compute.\\n```python\\nprint(6*7)\\n")
    'print(6*7)\\n'
    >>> open_python_block("```python\\nx=1\\n```\\nDone.") is None
    True
    """
    matches = list(_PYTHON_OPEN.finditer(text))
    if not matches:
        return None
    body = text[matches[-1].end():]
    if "```" in body:
        return None
    return body


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
    return truncate_middle(body, limit)


class PromptBuilder:
    """Renders the first prompt of a problem and the tool-output text appended after each code block."""

    def __init__(self, template: Template, tokenizer: Tokenizer | None, output_chars: int) -> None:
        self.template = template
        self.tokenizer = tokenizer
        self.output_chars = output_chars

    def messages(self, problem: Problem) -> list[dict[str, str]]:
        user = self.template.user.replace("{problem}", problem.text.strip())
        return [{"role": "system", "content": self.template.system}, {"role": "user", "content": user}]

    def first(self, problem: Problem) -> tuple[str, list[int] | None]:
        """The prompt text and, with a tokenizer, its token ids."""
        messages = self.messages(problem)
        if self.tokenizer is None:
            # No tokenizer (replay, or a server known only by name): a plain rendering the engine sees as text.
            text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
            return text, None
        text = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return text, self.encode(text)

    def encode(self, text: str) -> list[int] | None:
        if self.tokenizer is None:
            return None
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def tool_output(self, execution: Execution) -> str:
        return self.template.output.replace("{output}", describe_execution(execution, self.output_chars))
