"""The config the submission notebook runs, from its settings cell: ``PRESET``, then ``CONFIG`` (a config file,
e.g. the ``chosen.yaml`` that ``solver tune`` wrote, attached as a dataset), then ``MODEL`` and ``COMPILE_CACHE``,
then ``OVERRIDES`` (dotted keys). Each layer adds keys over those below it, later layers winning key by key: a
tuned policy keeps the preset's engine, and ``OVERRIDES`` holds only what the user adds, so no example can drop the
model or the compile cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from solver.config import Config, load_config


def notebook_config(preset: str, config_file: str | Path | None = None, *, model: str | None = None,
                    compile_cache: str | None = None, overrides: Mapping[str, Any] | None = None) -> Config:
    """The notebook's config (module docstring); a one-line ConfigError when a layer is bad (an unreadable
    ``CONFIG``, an unknown key). ``model`` None: the preset's (the embedded tiny model when it names none);
    ``compile_cache`` None: none shipped, the engine compiles cold.

    >>> c = notebook_config("h100-gptoss", model="/kaggle/input/gpt-oss-120b", overrides={"solve.reps": 16})
    >>> c.preset, c.engine.model, c.solve.reps, c.prompt.dialect, c.engine.compile_cache
    ('h100-gptoss', '/kaggle/input/gpt-oss-120b', 16, 'harmony', None)
    """
    placed = {key: value for key, value in (("engine.model", model), ("engine.compile_cache", compile_cache))
              if value is not None}
    return load_config(preset, config_file, {**placed, **dict(overrides or {})})
