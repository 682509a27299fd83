"""Conversation formats, chosen by name (``prompt.dialect``): ``fences``, ``harmony``, ``hermes``; how a code run
is shown to the model (``output``); the prompt templates (``prompts``).

openai_harmony is imported only where harmony is used, so a fences run never imports it. Outsiders import from
here; the modules behind it are this package's own."""

from __future__ import annotations

import importlib

from solver.config import Config, ConfigError
from solver.dialects.base import Dialect, Dialogue, Prompt, Reading, Stops, TurnOutput
from solver.dialects.fences import CODE_STOP
from solver.dialects.fit import check_model_dialect
from solver.dialects.harmony import load_encoding, message_text
from solver.dialects.output import OutputStyle, describe_execution, execution_from_shown
from solver.dialects.prompts import PromptTemplate
from solver.types import Tokenizer

__all__ = ["CODE_STOP", "DIALECTS", "Dialect", "Dialogue", "OutputStyle", "Prompt", "PromptTemplate", "Reading",
           "Stops", "TurnOutput", "check_dialect", "check_model_dialect", "describe_execution", "execution_from_shown", "load_encoding",
           "make_dialect", "message_text"]

# name -> "module:factory(config, tokenizer, template) -> Dialect"
DIALECTS: dict[str, str] = {
    "fences": "solver.dialects.fences:from_config",
    "harmony": "solver.dialects.harmony:from_config",
    "hermes": "solver.dialects.hermes:from_config",
}


def make_dialect(config: Config, tokenizer: Tokenizer | None, template: PromptTemplate | None = None) -> Dialect:
    """The dialect the config names, with its prompt template (``template`` when the caller loaded it already,
    else loaded here); ConfigError (one line) when it cannot be built (an unknown name, a template missing,
    harmony's vocabulary not available offline).

    >>> from solver.config import Config
    >>> make_dialect(Config(), None).name
    'fences'
    """
    target = DIALECTS.get(config.prompt.dialect)
    if target is None:
        raise ConfigError(f"unknown dialect {config.prompt.dialect!r} (choose from {', '.join(sorted(DIALECTS))})")
    module_name, function = target.split(":")
    template = template if template is not None else PromptTemplate.load(config.prompt.template)
    return getattr(importlib.import_module(module_name), function)(config, tokenizer, template)


def check_dialect(config: Config) -> None:
    """Before a run starts anything heavy: harmony's vocabulary is there offline; hermes gets a local model's
    tokenizer whose chat template renders tools. ConfigError (one line) otherwise."""
    if config.prompt.dialect == "harmony":
        from solver.dialects.vocabulary import check_vocabulary

        check_vocabulary()
    elif config.prompt.dialect == "hermes" and config.engine.name in ("vllm", "openai"):
        from pathlib import Path

        from solver.models import resolve_model

        vllm = config.engine.name == "vllm"  # a server's model is the name it serves: the hub is not asked
        model = Path(resolve_model(config.engine.model, check_hub=vllm)) if vllm or config.engine.model else None
        if model is not None and (model / "config.json").is_file():  # a hub id or a remote model: checked later
            from transformers import AutoTokenizer

            make_dialect(config, AutoTokenizer.from_pretrained(str(model)))
