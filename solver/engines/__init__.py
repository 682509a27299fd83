"""Engine backends, chosen by name. Each is imported only when used, so replay never imports vLLM."""

from __future__ import annotations

import importlib

from solver.config import Config, ConfigError
from solver.types import Engine

# name -> "module:async factory(config) -> Engine"
ENGINE_FACTORIES: dict[str, str] = {
    "vllm": "solver.engines.vllm_async:open_vllm_engine",
    "openai": "solver.engines.openai.engine:open_openai_engine",
    "replay": "solver.replay.replay_engine:open_replay_engine",
}


def factory_path(name: str) -> str:
    """The "module:function" of the engine called ``name``; ConfigError for an unknown name (nothing imported).

    >>> factory_path("replay")
    'solver.replay.replay_engine:open_replay_engine'
    """
    target = ENGINE_FACTORIES.get(name)
    if target is None:
        raise ConfigError(f"unknown engine {name!r} (choose from {', '.join(sorted(ENGINE_FACTORIES))})")
    return target


async def open_engine(config: Config) -> Engine:
    """Build and start the engine the config names."""
    module_name, function = factory_path(config.engine.name).split(":")
    factory = getattr(importlib.import_module(module_name), function)
    return await factory(config)
