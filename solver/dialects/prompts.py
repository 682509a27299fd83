"""Prompt templates (data files in ``prompts/``); what the model is shown for a code run is ``output.py``.

How a conversation is rendered to tokens, and where code and answers are found in it, is a dialect's business
(``solver/dialects``); the texts themselves are data here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from solver.config import ConfigError


def prompt_dirs() -> list[Path]:
    """Where templates live: packaged inside the wheel, or the repository's top-level ``prompts/``."""
    package = Path(__file__).resolve().parents[1]  # solver/
    return [package / "prompts", package.parent / "prompts"]


def template_names() -> list[str]:
    return sorted({p.stem for d in prompt_dirs() if d.is_dir() for p in d.glob("*.yaml")})


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str
    user: str
    output: str

    @classmethod
    def load(cls, name: str) -> PromptTemplate:
        for directory in prompt_dirs():
            path = directory / f"{name}.yaml"
            if path.is_file():
                data = yaml.safe_load(path.read_text())
                missing = {"system", "user", "output"} - set(data or {})
                if missing:
                    raise ConfigError(f"prompt template {path} lacks {sorted(missing)[0]!r}")
                return cls(name, data["system"], data["user"], data["output"])
        raise ConfigError(f"unknown prompt template {name!r} (choose from {', '.join(template_names())})")
