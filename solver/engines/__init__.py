"""Engine backends, chosen by name. Each is imported only when used, so replay never imports vLLM."""

from __future__ import annotations

import importlib

from solver.config import Config, ConfigError
from solver.types import Engine

# name -> "module:async factory(config) -> Engine"
ENGINE_FACTORIES: dict[str, str] = {
    "vllm": "solver.engines.vllm_async:open_vllm_engine",
    "openai": "solver.engines.openai_server:open_openai_engine",
    "replay": "solver.engines.replay:open_replay_engine",
}


async def open_engine(config: Config) -> Engine:
    """Build and start the engine the config names."""
    target = ENGINE_FACTORIES.get(config.engine.name)
    if target is None:
        raise ConfigError(f"unknown engine {config.engine.name!r} (choose from {', '.join(sorted(ENGINE_FACTORIES))})")
    module_name, function = target.split(":")
    factory = getattr(importlib.import_module(module_name), function)
    return await factory(config)
