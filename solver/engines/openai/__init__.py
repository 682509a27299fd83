"""The engine backend for vLLM's OpenAI-compatible servers: ``protocol`` (request bodies, server-sent events),
``endpoints`` (routing, health, retries, discovery), ``engine`` (the streaming engine and its opening), ``load``
(requests spread over endpoints and their statistics, for the load benchmarks)."""

from solver.engines.openai.endpoints import EndpointError, RetryPolicy, parse_metric
from solver.engines.openai.engine import OpenAIServerEngine, open_openai_engine
from solver.engines.openai.load import EndpointStats, LoadSample, check_loopback, free_ports, report, run_load

__all__ = ["EndpointError", "EndpointStats", "LoadSample", "OpenAIServerEngine", "RetryPolicy", "check_loopback",
           "free_ports", "open_openai_engine", "parse_metric", "report", "run_load"]
