"""A tokenizer whose chat template renders tools, available offline: the embedded tiny model's tokenizer (its
vocabulary has ChatML's <|im_start|> / <|im_end|>) with Qwen3's chat template as vLLM ships it in its wheel
(``vllm/transformers_utils/chat_templates/template_minicpmv45.jinja``: MiniCPM-V 4.5 is built on Qwen3 and uses
Qwen3's template, tools and <tool_call> included)."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def qwen3_template() -> str:
    """The template file from the installed vLLM; the test is skipped, with one line, where vLLM is not installed."""
    import pytest

    spec = importlib.util.find_spec("vllm")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    path = Path(folders[0]) / "transformers_utils/chat_templates/template_minicpmv45.jinja" if folders else None
    if path is None or not path.is_file():
        pytest.skip("Qwen3's chat template comes from vLLM's wheel, and vLLM is not installed")
    return path.read_text()


def hermes_tokenizer():  # type: ignore[no-untyped-def]
    from transformers import AutoTokenizer

    from solver.models import ensure_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(str(ensure_tiny_model()))
    tokenizer.chat_template = qwen3_template()
    return tokenizer
