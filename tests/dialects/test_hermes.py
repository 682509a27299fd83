"""The hermes dialect (Qwen3-style <tool_call> JSON) with a real tokenizer and a real chat template that renders
tools (see tests/hermes_tokenizer.py); the engine is a scripted text double, the python tool an in-process session
double that keeps its namespace."""

from __future__ import annotations

import asyncio
import json

import pytest
from doubles import ScriptedEngine, SessionSandbox, printed
from hermes_tokenizer import hermes_tokenizer

from solver.config import ConfigError, load_config
from solver.dialects import make_dialect
from solver.loop.repetition import run_repetition
from solver.types import Problem

PROBLEM = Problem("q1", "What is 6 times 7?", answer="42")


def config(**overrides):
    return load_config("tiny", overrides={"prompt.dialect": "hermes", "sandbox.code_mode": "stateful",
                                          "sampling.max_tokens": 400, "sampling.max_total_tokens": 4000,
                                          "sampling.max_turns": 5, **overrides})


@pytest.fixture(scope="module")
def tokenizer():
    return hermes_tokenizer()


def call(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "python", "arguments": {"code": code}}) + "\n</tool_call>"


def test_hermes_tool_loop_end_to_end_with_a_stateful_session(tokenizer):
    script = ["Let me compute.\n" + call("x = 6 * 7"), "Now show it.\n" + call("print(x)"),
              "The product is \\boxed{42}."]
    engine = ScriptedEngine(lambda req: script[req.turn])
    sandbox = SessionSandbox(printed("unused"))
    dialect = make_dialect(config(), tokenizer)
    rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox, dialect=dialect, config=config()))
    assert rep.status == "done", rep.error
    assert len(sandbox.sessions) == 1 and sandbox.sessions[0].closed
    assert sandbox.sessions[0].ran == ["x = 6 * 7", "print(x)"]
    assert [a.value for a in rep.answers if a.source == "boxed"] == ["42"] and rep.answer_from("code").value == "42"
    first = engine.requests[0].prompt
    assert '"name": "python"' in first and "<tools>" in first  # the template declared the tool
    for k, request in enumerate(engine.requests):
        assert request.stop == ("</tool_call>",)
        decoded = tokenizer.decode(list(request.prompt_token_ids), skip_special_tokens=False,
                                   clean_up_tokenization_spaces=False)
        assert decoded == request.prompt == first + "".join(t.text + t.appended for t in rep.turns[:k])
    # The call's closing tag once, then the tool message as the template renders it, then the next header.
    assert rep.turns[1].appended.startswith("</tool_call><|im_end|>\n<|im_start|>user\n<tool_response>\n42\n"
                                            "</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert engine.requests[2].prompt.count("</tool_call>") == 2 + first.count("</tool_call>")


def test_hermes_call_to_another_tool_or_bad_json_ends_without_running_code(tokenizer):
    for text in ('<tool_call>\n{"name": "search", "arguments": {"q": "x"}}\n</tool_call>',
                 "<tool_call>\n{not json}\n</tool_call>"):
        sandbox = SessionSandbox(printed(""))
        engine = ScriptedEngine(lambda req, t=text: t)
        rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox,
                                         dialect=make_dialect(config(), tokenizer), config=config()))
        assert rep.status == "done" and not rep.executions and sandbox.sessions == []


def test_hermes_needs_a_tokenizer_whose_template_renders_tools(tokenizer):
    with pytest.raises(ConfigError, match="needs the model's tokenizer"):
        make_dialect(config(), None)
    from transformers import AutoTokenizer

    from solver.models import ensure_tiny_model

    plain = AutoTokenizer.from_pretrained(str(ensure_tiny_model()))  # SmolLM2's own template ignores tools
    with pytest.raises(ConfigError, match="does not render tools"):
        make_dialect(config(), plain)


def test_qwen3_preset_on_a_model_whose_template_ignores_tools_is_a_one_line_error_before_the_run():
    from solver.loop.parts import prepare_run

    with pytest.raises(ConfigError, match="does not render tools") as caught:
        prepare_run(load_config("qwen3"))  # no --model: the tiny model, whose template has no tools
    assert "\n" not in str(caught.value)
