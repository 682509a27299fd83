"""The fences dialect with the tiny model's real tokenizer and a double that stops the way vLLM V1 does (the
tokens completing a stop string stay in the ids, the string is cut from the text; a token may carry text past
the stop string). The real-engine version of this check is tests/loop/test_engine_real.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest
from doubles import ScriptedSandbox, printed

from solver.config import load_config
from solver.dialects import make_dialect
from solver.dialects.fences import CODE_STOP
from solver.loop.repetition import run_repetition
from solver.types import Delta, GenerationRequest, Problem


@pytest.fixture(scope="module")
def tokenizer():
    from transformers import AutoTokenizer

    from solver.models import ensure_tiny_model

    return AutoTokenizer.from_pretrained(str(ensure_tiny_model()))


def decode(tokenizer, ids) -> str:
    return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)


@dataclass
class StopsLikeVllm:
    """Tokenises ``replies[turn]`` with the real tokenizer and streams it token by token until the decoded text
    contains a stop string: the ids up to the token completing it are returned, the text up to the string."""

    tokenizer: object
    replies: list[str]
    requests: list[GenerationRequest] = field(default_factory=list)
    name: str = "stops-like-vllm"

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        ids = self.tokenizer.encode(self.replies[request.turn], add_special_tokens=False)
        for n in range(1, len(ids) + 1):
            text = decode(self.tokenizer, ids[:n])
            hits = [(text.find(s), s) for s in request.stop if s in text]
            if hits:
                at, stop = min(hits)
                yield Delta(text=text[:at], token_ids=tuple(ids[:n]), finish_reason="stop", stop_reason=stop,
                            prompt_tokens=len(request.prompt_token_ids or ()))
                return
        yield Delta(text=decode(self.tokenizer, ids), token_ids=tuple(ids), finish_reason="stop")

    def running_requests(self) -> int:
        return 0

    async def close(self) -> None:
        return None


def test_a_closing_fence_is_in_the_next_prompt_once_and_the_ids_are_the_text(tokenizer):
    replies = ["Let me compute.\n```python\nprint(6*7)\n```\n\nThen more.", "So the answer is \\boxed{42}."]
    engine = StopsLikeVllm(tokenizer, replies)
    cfg = load_config("tiny", overrides={"sampling.max_turns": 3})
    dialect = make_dialect(cfg, tokenizer)
    rep = asyncio.run(run_repetition(Problem("p", "6*7?"), 0, engine=engine, sandbox=ScriptedSandbox(printed("42")),
                                     dialect=dialect, config=cfg))
    assert rep.status == "done" and rep.answer_from("boxed").value == "42"
    first, second = engine.requests
    assert decode(tokenizer, second.prompt_token_ids) == second.prompt
    assert second.prompt == first.prompt + rep.turns[0].text + rep.turns[0].appended
    after = second.prompt[len(first.prompt):]
    assert after.count(CODE_STOP) == 2  # the block's closing fence once, and the output block's own
    assert "```\n```\n" not in after and "print(6*7)\n```\n```output\n42\n```\n" in after
    assert rep.turns[0].appended.startswith(CODE_STOP)


def test_a_token_that_straddles_the_stop_string_keeps_its_text_in_the_prompt(tokenizer):
    """When the token completing the stop string carries text past it, the model saw that text: it stays in the
    prompt and in the log (``Turn.appended``), and the ids still decode to the prompt text."""
    replies = ["```python\nx = 1\n```\n\n\n", "Done: \\boxed{1}"]
    ids = tokenizer.encode(replies[0], add_special_tokens=False)
    assert decode(tokenizer, ids[-1:]) == "\n\n\n"  # this token completes "```\n" and carries "\n\n" past it
    engine = StopsLikeVllm(tokenizer, replies)
    cfg = load_config("tiny", overrides={"sampling.max_turns": 3})
    rep = asyncio.run(run_repetition(Problem("p", "x?"), 0, engine=engine, sandbox=ScriptedSandbox(printed("1")),
                                     dialect=make_dialect(cfg, tokenizer), config=cfg))
    first, second = engine.requests
    assert rep.turns[0].appended.startswith("```\n\n\n```output")
    assert decode(tokenizer, second.prompt_token_ids) == second.prompt
    assert second.prompt == first.prompt + rep.turns[0].text + rep.turns[0].appended
