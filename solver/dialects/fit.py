"""Whether the dialect a config speaks fits the model it loads: a model family that speaks one dialect only (gpt-oss
speaks harmony: fed fences, it never makes a real tool call) is named here with the preset written for it, and a
run whose dialect does not fit is refused in one line, before anything heavy starts, naming that preset.

The model's family comes from its ``config.json`` (``model_type``) where the model is a local folder, else from its
name (a hub id such as ``openai/gpt-oss-120b``, or a path on the machine a command is written for).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from solver.config import Config, ConfigError


@dataclass(frozen=True)
class Family:
    """Models that speak one dialect: their ``config.json`` ``model_type``, the name they go by (in a hub id or a
    folder's name) and the preset written for them."""

    model_type: str
    name: str
    dialect: str
    preset: str


FAMILIES: tuple[Family, ...] = (Family("gpt_oss", "gpt-oss", "harmony", "h100-gptoss"),)


@dataclass(frozen=True)
class Identified:
    """A model's family and how it was told: ``config.json model_type gpt_oss`` or ``its name``."""

    family: Family
    by: str


def identify(model: str | None) -> Identified | None:
    """The family ``model`` belongs to (None: the embedded model, or a model no family names).

    >>> identify("openai/gpt-oss-120b").family.preset, identify("openai/gpt-oss-120b").by
    ('h100-gptoss', 'its name')
    >>> identify("Qwen/Qwen3-8B") is None, identify(None) is None
    (True, True)
    """
    if model is None:
        return None
    config = Path(model).expanduser() / "config.json"
    if config.is_file():
        try:
            model_type = json.loads(config.read_text()).get("model_type")
        except (OSError, ValueError, AttributeError):
            return None  # the engine says what is wrong with it
        family = next((f for f in FAMILIES if f.model_type == model_type), None)
        return Identified(family, f"config.json model_type {model_type}") if family else None
    name = Path(model.rstrip("/")).name.lower().replace("_", "-")
    family = next((f for f in FAMILIES if name.startswith(f.name)), None)
    return Identified(family, "its name") if family else None


def check_model_dialect(config: Config) -> None:
    """ConfigError (one line) when the vLLM engine's model belongs to a family whose dialect the config does not
    speak, naming the preset to use.

    >>> check_model_dialect(Config().replace({"engine.model": "openai/gpt-oss-120b", "preset": "h100"}))
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: openai/gpt-oss-120b is a gpt-oss model (its name): it speaks the harmony dialect, not \
the fences dialect of preset h100; use preset h100-gptoss (--preset h100-gptoss; the notebook's PRESET)
    >>> check_model_dialect(Config().replace({"engine.model": "openai/gpt-oss-120b", "prompt.dialect": "harmony"}))
    """
    if config.engine.name != "vllm":
        return
    found = identify(config.engine.model)
    if found is None or found.family.dialect == config.prompt.dialect:
        return
    f = found.family
    raise ConfigError(f"{config.engine.model} is a {f.name} model ({found.by}): it speaks the {f.dialect} dialect, "
                      f"not the {config.prompt.dialect} dialect of preset {config.preset}; use preset {f.preset} "
                      f"(--preset {f.preset}; the notebook's PRESET)")
