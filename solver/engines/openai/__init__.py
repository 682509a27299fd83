"""The engine backend for vLLM's OpenAI-compatible servers: ``protocol`` (request bodies, server-sent events),
``endpoints`` (routing, health, retries, discovery), ``engine`` (the streaming engine and its opening)."""

from solver.engines.openai.endpoints import EndpointError, RetryPolicy, parse_metric
from solver.engines.openai.engine import OpenAIServerEngine, open_openai_engine

__all__ = ["EndpointError", "OpenAIServerEngine", "RetryPolicy", "open_openai_engine", "parse_metric"]
