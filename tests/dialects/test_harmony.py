"""The harmony dialect with the real openai_harmony encoder: token sequences are made by the encoder itself and
replayed by a scripted token engine (a control-flow double); the python tool runs in an in-process session
double that keeps its namespace, so a variable defined by one call is used by the next."""

from __future__ import annotations

import asyncio
import random

import pytest
from doubles import ScriptedSandbox, ScriptedTokenEngine, SessionSandbox, printed

from solver.config import AnswerConfig, ConfigError, load_config
from solver.core.answers import extract_answers
from solver.dialects import TurnOutput, make_dialect
from solver.loop.repetition import run_repetition
from solver.types import Execution, GenerationRequest, Problem

PROBLEM = Problem("h1", "What is 6 times 7?", answer="42")


def config(**overrides):
    return load_config("tiny", overrides={"prompt.dialect": "harmony", "sandbox.code_mode": "stateful",
                                          "sampling.max_tokens": 400, "sampling.max_total_tokens": 2000,
                                          "sampling.max_turns": 6, **overrides})


@pytest.fixture(scope="module")
def dialect():
    return make_dialect(config(), None)


def tokens(dialect, text: str) -> list[int]:
    return list(dialect.encoding.encode(text, allowed_special="all"))


def turns(dialect) -> list[list[int]]:
    """A gpt-oss-like repetition: define a variable, use it in a second call, answer on the final channel."""
    return [
        tokens(dialect, "<|channel|>analysis<|message|>Let me compute with python.<|end|>"
                        "<|start|>assistant to=python<|channel|>analysis code<|message|>x = 6 * 7<|call|>"),
        tokens(dialect, "<|channel|>analysis<|message|>Now print it.<|end|>"
                        "<|start|>assistant to=python<|channel|>analysis code<|message|>print(x)<|call|>"),
        tokens(dialect, "<|channel|>final<|message|>The product is \\boxed{42}.<|return|>"),
    ]


def test_harmony_tool_loop_end_to_end_with_scripted_token_engine_and_stateful_session(dialect):
    script = turns(dialect)
    engine = ScriptedTokenEngine(lambda req: script[req.turn])
    sandbox = SessionSandbox(printed("unused"))
    cfg = config()
    rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox, dialect=dialect, config=cfg))
    assert rep.status == "done", rep.error
    assert [t.appended.split("<|start|>")[0] for t in rep.turns] == ["<|call|>", "<|call|>", "<|return|>"]
    # One session for the whole repetition, closed at its end; the second call used the first call's variable.
    assert len(sandbox.sessions) == 1 and sandbox.sessions[0].closed and sandbox.ran == []
    assert sandbox.sessions[0].ran == ["x = 6 * 7", "print(x)"]
    assert rep.turns[1].execution is not None and rep.turns[1].execution.stdout == "42\n"
    assert [a.value for a in rep.answers if a.source == "boxed"] == ["42"]
    assert rep.answer_from("code").value == "42"
    # Stop token ids end each request (no stop strings); every prompt's ids decode to its text, which is the
    # first prompt plus the logged turns; the model's own tokens are kept (the reasoning too).
    enc = dialect.encoding
    first = engine.requests[0].prompt
    for k, request in enumerate(engine.requests):
        assert request.stop == () and request.stop_token_ids == (200002, 200012)
        assert enc.decode(list(request.prompt_token_ids)) == request.prompt
        assert request.prompt == first + "".join(t.text + t.appended for t in rep.turns[:k])
        if k:
            before = engine.requests[k - 1]
            assert request.prompt_token_ids[: len(before.prompt_token_ids) + len(script[k - 1])] == \
                before.prompt_token_ids + tuple(script[k - 1])
    # The tool's output goes back from the python tool to the assistant, on the call's channel.
    assert "<|start|>python to=assistant<|channel|>analysis<|message|>42<|end|><|start|>assistant" in \
        engine.requests[2].prompt
    assert "Let me compute with python." in engine.requests[2].prompt


def test_harmony_prompt_equals_a_full_rerender_when_the_model_writes_canonical_messages(dialect):
    """Keeping the model's tokens is the same as re-rendering the conversation each turn, for messages as the
    library renders them."""
    from openai_harmony import Author, Conversation, Message, Role

    enc = dialect.encoding
    dialogue = dialect.start(PROBLEM)
    header = list(dialect.assistant_header)
    thought = Message.from_role_and_content(Role.ASSISTANT, "Compute.").with_channel("analysis")
    call = Message.from_role_and_content(Role.ASSISTANT, "print(6*7)").with_channel("analysis") \
        .with_recipient("python").with_content_type("code")
    generated = list(enc.render(thought)) + list(enc.render(call))
    assert generated[: len(header)] == header
    generated = generated[len(header):]  # the prompt already ends with the assistant header
    out = TurnOutput("", tuple(generated), "stop", stop_token=generated[-1])
    reading = dialogue.read(out)
    assert reading.call == "print(6*7)"
    dialogue.reply(out, reading, Execution("print(6*7)", "ok", "42\n", "", 0.01))
    tool = Message.from_author_and_content(Author.new(Role.TOOL, "python"), "42").with_recipient("assistant") \
        .with_channel("analysis")
    rerender = enc.render_conversation_for_completion(
        Conversation.from_messages(dialogue.messages[:3] + [thought, call, tool]), Role.ASSISTANT)
    assert list(dialogue.prompt().token_ids) == list(rerender)


def test_harmony_reading_survives_garbage(dialect):
    """Random ids (a random model's output), cut anywhere, with or without a stop token: never an exception,
    never a tool call unless a python message parses."""
    rng = random.Random(7)
    dialogue = dialect.start(PROBLEM)
    specials = [200005, 200006, 200007, 200008, 200012, 200002, 200003]
    for _ in range(300):
        ids = [rng.choice(specials) if rng.random() < 0.3 else rng.randrange(200000) for _ in range(rng.randrange(0, 40))]
        stop = rng.choice([None, 200012, 200002])
        finish = "stop" if stop is not None else rng.choice(["length", "stop", "abort"])
        reading = dialogue.read(TurnOutput("", tuple(ids + ([stop] if stop else [])), finish, stop_token=stop))
        assert reading.call is None or stop == 200012
        assert dialect.encoding.decode(ids + ([stop] if stop else [])) == reading.text + reading.ending


def test_harmony_call_to_another_tool_or_a_cut_turn_ends_the_repetition_without_running_code(dialect):
    browse = tokens(dialect, "<|channel|>commentary to=browser.search code<|message|>{}<|call|>")
    cut = tokens(dialect, "<|channel|>analysis<|message|>thinking and thinking")
    for script, status in ((browse, "done"), (cut, "length")):
        sandbox = SessionSandbox(printed(""))
        engine = ScriptedTokenEngine(lambda req, s=script: s)
        cfg = config(**{"sampling.max_tokens": 5 if status == "length" else 400})
        rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox, dialect=dialect, config=cfg))
        assert rep.status == status and not rep.executions and sandbox.sessions == []


def test_stateful_mode_on_a_sandbox_without_sessions_runs_each_call_fresh(dialect):
    script = turns(dialect)
    sandbox = ScriptedSandbox(printed("42"))  # no session(): the older sandbox
    engine = ScriptedTokenEngine(lambda req: script[req.turn])
    rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=sandbox, dialect=dialect, config=config()))
    assert rep.status == "done" and sandbox.ran == ["x = 6 * 7", "print(x)"]


def test_cancelled_repetition_closes_its_session(dialect):
    script = turns(dialect)
    slow = ScriptedTokenEngine(lambda req: script[req.turn] if req.turn == 0 else script[1] * 50, per_delta=1,
                               delay_s=0.01)
    sandbox = SessionSandbox(printed(""))

    async def scenario():
        task = asyncio.create_task(run_repetition(PROBLEM, 0, engine=slow, sandbox=sandbox, dialect=dialect,
                                                  config=config()))
        while len(slow.requests) < 2:  # the first call ran; the second turn is streaming
            await asyncio.sleep(0.01)
        task.cancel()
        return await task

    rep = asyncio.run(scenario())
    assert rep.status == "cancelled"
    assert len(sandbox.sessions) == 1 and sandbox.sessions[0].closed


def test_first_answer_stop_fires_at_the_first_valid_box_in_any_channel(dialect):
    dialogue = dialect.start(PROBLEM)
    unsure = tokens(dialect, "<|channel|>analysis<|message|>maybe \\boxed{} or \\boxed{x}, \\boxed{2.5}? no.")
    assert not any(dialogue.watch("", (t,)) for t in unsure)
    analysis = tokens(dialect, " So \\boxed{42} it is")
    fired = [dialogue.watch("", (t,)) for t in analysis]
    assert fired.index(True) == analysis.index(tokens(dialect, "}")[0])  # at the token closing the box
    dialogue.read(TurnOutput("", tuple(unsure + analysis), "stop", ended_by_loop=True))
    final = tokens(dialect, "<|channel|>final<|message|>So \\boxed{42}")
    assert [dialogue.watch("", (t,)) for t in final][-1]  # a new turn, a new watch


def read_turn(dialogue, dialect, text: str, **kwargs):
    ids = tokens(dialect, text)
    stop = ids[-1] if ids[-1] in (200002, 200012) else None
    out = TurnOutput("", tuple(ids), "stop", stop_token=stop, **kwargs)
    return out, dialogue.read(out)


def test_a_box_in_the_analysis_channel_is_the_answer_and_the_final_channel_wins(dialect):
    dialogue = dialect.start(PROBLEM)
    _, reading = read_turn(dialogue, dialect, "<|channel|>analysis<|message|>The answer is 41, so \\boxed{x} "
                                              "and \\boxed{42}", ended_by_loop=True)
    assert [(a.value, a.source) for a in extract_answers(reading.answer_text, AnswerConfig())] == [("42", "boxed")]
    _, reading = read_turn(dialogue, dialect, "<|channel|>analysis<|message|>\\boxed{7}?<|end|><|start|>assistant"
                                              "<|channel|>final<|message|>It is \\boxed{42}.<|return|>")
    assert [a.value for a in extract_answers(reading.answer_text, AnswerConfig())] == ["42"]
    assert not reading.goes_on


def test_an_answerless_turn_gets_the_follow_up_at_most_max_follow_ups_times():
    asked = make_dialect(config(**{"prompt.follow_up": "Box it.", "prompt.max_follow_ups": 2}), None)
    dialogue = asked.start(PROBLEM)
    # an answerless return, then a call to no tool: each gets the follow-up
    for turn in ("<|channel|>final<|message|>I give up.<|return|>", "<|channel|>analysis<|message|>print(1)<|call|>"):
        out, reading = read_turn(dialogue, asked, turn)
        assert reading.goes_on and reading.call is None
        appended = dialogue.reply(out, reading, None)
        assert appended == "<|start|>user<|message|>Box it.<|end|><|start|>assistant"
        assert asked.encoding.decode(list(dialogue.prompt().token_ids)).endswith(turn + appended)
    _, reading = read_turn(dialogue, asked, "<|channel|>final<|message|>Still no.<|return|>")
    assert not reading.goes_on  # a third would be one too many
    _, reading = read_turn(asked.start(PROBLEM), asked, "<|channel|>final<|message|>\\boxed{42}<|return|>")
    assert not reading.goes_on  # answered: no follow-up
    off = make_dialect(config(), None)
    _, reading = read_turn(off.start(PROBLEM), off, "<|channel|>final<|message|>No.<|return|>")
    assert not reading.goes_on  # follow-ups are off unless the preset sets them


def test_follow_ups_through_the_loop():
    cfg = config(**{"prompt.follow_up": "Box it.", "prompt.max_follow_ups": 1})
    asked = make_dialect(cfg, None)
    script = [tokens(asked, "<|channel|>final<|message|>No idea.<|return|>"),
              tokens(asked, "<|channel|>final<|message|>Then \\boxed{42}.<|return|>")]
    engine = ScriptedTokenEngine(lambda req: script[req.turn])
    rep = asyncio.run(run_repetition(PROBLEM, 0, engine=engine, sandbox=SessionSandbox(printed("")), dialect=asked,
                                     config=cfg))
    assert rep.status == "done" and len(rep.turns) == 2 and [a.value for a in rep.answers] == ["42"]
    assert rep.turns[0].appended == "<|return|><|start|>user<|message|>Box it.<|end|><|start|>assistant"
    assert engine.requests[1].prompt.endswith(rep.turns[0].text + rep.turns[0].appended)


def test_the_tool_description_is_the_presets_or_the_librarys():
    from openai_harmony import ToolNamespaceConfig

    default = make_dialect(config(), None).start(PROBLEM).prompt().text
    assert ToolNamespaceConfig.python().description in default
    told = make_dialect(config(**{"prompt.tool_description": "Runs Python. No internet."}), None)
    text = told.start(PROBLEM).prompt().text
    assert "## python\n\nRuns Python. No internet.\n\n" in text and "/mnt/data" not in text


def test_follow_ups_without_a_text_are_a_config_error():
    with pytest.raises(ConfigError, match="prompt.max_follow_ups needs a prompt.follow_up"):
        config(**{"prompt.max_follow_ups": 3})


def test_harmony_requests_carry_reasoning_effort_and_the_python_tool():
    low = make_dialect(config(**{"prompt.reasoning_effort": "low"}), None)
    text = low.start(PROBLEM).prompt().text
    assert "Reasoning: low" in text and "## python" in text
    assert "What is 6 times 7?" in text and text.endswith("<|start|>assistant")


def test_scripted_request_double_is_told_the_stop_ids(dialect):
    request = GenerationRequest("r", "", (1,), 10, 1.0, 1.0, 0, (), stop_token_ids=(200012,))
    ids = tokens(dialect, "a<|call|>b")
    got = asyncio.run(_collect(ScriptedTokenEngine(lambda r: ids).stream(request)))
    assert sum((d.token_ids for d in got), ()) == tuple(ids[:2]) and got[-1].stop_token == 200012


async def _collect(stream):
    return [d async for d in stream]


def test_missing_harmony_vocabulary_is_a_one_line_error_before_the_run(tmp_path, monkeypatch):
    from solver.loop.parts import prepare_run

    monkeypatch.setenv("SOLVER_CACHE", str(tmp_path))
    monkeypatch.delenv("TIKTOKEN_ENCODINGS_BASE", raising=False)
    with pytest.raises(ConfigError, match="needs its vocabulary offline") as caught:
        prepare_run(config(**{"engine.name": "replay", "engine.replay_from": ["x"]}))
    assert "\n" not in str(caught.value)
    monkeypatch.setenv("TIKTOKEN_ENCODINGS_BASE", str(tmp_path))
    with pytest.raises(ConfigError, match="holds no o200k_base.tiktoken"):
        prepare_run(config(**{"engine.name": "replay", "engine.replay_from": ["x"]}))


def test_vocabulary_is_unpacked_from_bpe_openai_with_its_checksum(tmp_path):
    import hashlib

    from solver.dialects.vocabulary import FILE, SHA256, prepare_vocabulary

    folder = prepare_vocabulary(tmp_path / "o200k")
    assert hashlib.sha256((folder / FILE).read_bytes()).hexdigest() == SHA256
    assert prepare_vocabulary(folder) == folder  # a second call only checks
