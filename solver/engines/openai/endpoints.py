"""Endpoints as this client sees them: URLs, routing to the least-loaded healthy server, the retry policy,
metrics, and discovery (what each server serves, which model to use).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx

from solver.config import ConfigError
from solver.engines.openai.protocol import one_line, server_message


class EndpointError(ConfigError):
    """No endpoint can serve the run (unreachable, or not serving the model); one line meant for the user."""


def normalise_url(url: str) -> str:
    """A base URL without trailing slash or ``/v1``; anything but http(s) with a host is a config error.

    >>> normalise_url("http://127.0.0.1:8000/v1/")
    'http://127.0.0.1:8000'
    >>> normalise_url("127.0.0.1:8000")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: endpoint '127.0.0.1:8000' is not an http(s) URL such as http://127.0.0.1:8000
    """
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"endpoint {url!r} is not an http(s) URL such as http://127.0.0.1:8000")
    path = parts.path.rstrip("/")
    path = path[: -len("/v1")] if path.endswith("/v1") else path
    return f"{parts.scheme}://{parts.netloc}{path}"


@dataclass
class Endpoint:
    """One server, as this client sees it."""

    url: str
    in_flight: int = 0  # requests from this client streaming from it now
    healthy: bool = True
    probe_at: float = 0.0  # when unhealthy: clock time of the next /health probe
    error: str | None = None  # why it was last marked unhealthy


def pick_endpoint(endpoints: Sequence[Endpoint], turn: int = 0) -> Endpoint | None:
    """The healthy endpoint with the fewest requests in flight; ties rotate with ``turn``.

    >>> es = [Endpoint("a", in_flight=2), Endpoint("b", in_flight=1), Endpoint("c", in_flight=1, healthy=False)]
    >>> pick_endpoint(es).url
    'b'
    >>> [pick_endpoint([Endpoint("a"), Endpoint("b")], t).url for t in range(3)]
    ['a', 'b', 'a']
    >>> pick_endpoint([Endpoint("a", healthy=False)]) is None
    True
    """
    n = len(endpoints)
    candidates = [(e.in_flight, (i - turn) % n, i) for i, e in enumerate(endpoints) if e.healthy]
    return endpoints[min(candidates)[2]] if candidates else None


@dataclass(frozen=True)
class RetryPolicy:
    """How hard one request tries to reach a server before it gives up with an error delta."""

    attempts: int = 5  # connection attempts per request, over all endpoints
    first_delay_s: float = 0.5  # wait before retrying when no endpoint is healthy; doubles each time
    max_delay_s: float = 4.0  # per wait
    total_s: float = 20.0  # all waits of one request together

    def delays(self) -> tuple[float, ...]:
        """The waits between attempts, capped per wait and in total.

        >>> RetryPolicy(attempts=5, first_delay_s=1, max_delay_s=3, total_s=6).delays()
        (1.0, 2.0, 3.0)
        >>> RetryPolicy(attempts=1).delays()
        ()
        """
        out: list[float] = []
        delay = self.first_delay_s
        for _ in range(self.attempts - 1):
            wait = min(delay, self.max_delay_s)
            if sum(out) + wait > self.total_s:
                break
            out.append(float(wait))
            delay *= 2
        return tuple(out)


def parse_metric(text: str, name: str) -> float | None:
    """The sum of one metric over its label sets in Prometheus text format, None when absent.

    >>> page = '# HELP x\\nvllm:num_requests_running{engine="0"} 2.0\\nvllm:num_requests_waiting 1'
    >>> parse_metric(page, "vllm:num_requests_running"), parse_metric(page, "vllm:other")
    (2.0, None)
    """
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and line[len(name): len(name) + 1] in ("{", " "):
            total += float(line.rsplit(" ", 1)[1])
            seen = True
    return total if seen else None


@dataclass(frozen=True)
class EndpointInfo:
    url: str
    models: dict[str, int | None]  # served model id -> its max_model_len (None when not reported)
    error: str | None = None


async def describe_endpoint(client: httpx.AsyncClient, url: str) -> EndpointInfo:
    """What one server serves, from ``/v1/models``; an unreachable or odd server is described by ``error``."""
    try:
        response = await client.get(url + "/v1/models", timeout=5.0)
    except httpx.HTTPError as exc:
        return EndpointInfo(url, {}, one_line(f"unreachable ({type(exc).__name__}: {exc or 'no answer'})"))
    if response.status_code != 200:
        return EndpointInfo(url, {}, f"HTTP {response.status_code} on /v1/models: {server_message(response.text)}")
    try:
        data = response.json()["data"]
        models = {m["id"]: m.get("max_model_len") for m in data}
    except (ValueError, KeyError, TypeError):
        return EndpointInfo(url, {}, "/v1/models did not answer with a model list (not an OpenAI server?)")
    return EndpointInfo(url, models)


def same_model(wanted: str, served: str) -> bool:
    """A configured model matches a served id exactly, or as the same local path.

    >>> same_model("org/name", "org/name"), same_model("/tmp/m/", "/tmp/m"), same_model("a", "b")
    (True, True, False)
    """
    if wanted == served:
        return True
    if wanted.startswith(("/", ".", "~")) and served.startswith(("/", ".", "~")):
        return Path(wanted).expanduser().resolve() == Path(served).expanduser().resolve()
    return False


def choose_model(infos: Sequence[EndpointInfo], wanted: str | None) -> tuple[str, list[EndpointInfo]]:
    """The served model id to use and the endpoints that serve it; raises EndpointError when none do.

    >>> a, b = EndpointInfo("http://a", {"m": 2048}), EndpointInfo("http://b", {}, "unreachable")
    >>> model, ok = choose_model([a, b], None); model, [i.url for i in ok]
    ('m', ['http://a'])
    >>> choose_model([a], "other")
    Traceback (most recent call last):
    ...
    solver.engines.openai.endpoints.EndpointError: no endpoint serves model 'other' (http://a serves m)
    >>> choose_model([b], None)
    Traceback (most recent call last):
    ...
    solver.engines.openai.endpoints.EndpointError: no endpoint reachable: http://b: unreachable
    """
    live = [i for i in infos if i.error is None and i.models]
    if not live:
        raise EndpointError("no endpoint reachable: " + "; ".join(f"{i.url}: {i.error or 'serves no model'}"
                                                               for i in infos))
    if wanted is None:
        wanted = next(iter(live[0].models))
    matching = [i for i in live if any(same_model(wanted, m) for m in i.models)]
    if not matching:
        served = "; ".join(f"{i.url} serves {', '.join(i.models)}" for i in live)
        raise EndpointError(f"no endpoint serves model {wanted!r} ({served})")
    served_id = next(m for m in matching[0].models if same_model(wanted, m))
    return served_id, matching
