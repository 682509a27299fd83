"""Which model a run loads: the path or hub id the config names, else the embedded tiny model when it names none.

A name that is not a folder here is a hub id only where the hub can give it, decided before anything loads (so a
mistyped path is one line, not a minute of vLLM's retries): a model already in the hub's cache on this machine is
taken; with ``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) set, any other is refused; else the hub is asked once
about it, for :data:`HUB_CHECK_S` seconds at most, and a model it does not have, or a hub it cannot reach, is
refused. Each refusal is a ``ModelError`` (bad input, exit 2) of one line.
"""

from __future__ import annotations

import os
from pathlib import Path

from solver.models.cache import ModelError
from solver.models.tiny import ensure_tiny_model

HUB_CHECK_S = 5.0  # the one question to the hub, at most; an offline machine fails it at once (no name resolves)


def resolve_model(model: str | None, *, check_hub: bool = True) -> str:
    """The model to load: the given path or hub id, or the embedded tiny model when none is given. ``check_hub``:
    a hub id is checked (module docstring); without it, a name a server is asked for is taken as it is."""
    if model is None:
        return str(ensure_tiny_model())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json")
        return str(path)
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").split("/", 1)[-1]:
        raise ModelError(f"model path {model} does not exist")
    problem = hub_problem(model) if check_hub else None
    if problem is not None:
        raise ModelError(problem)
    return model  # a hub id such as org/name; vLLM fetches it


def offline() -> bool:
    """Whether the hub is off for this process, as huggingface_hub and transformers read their variables.

    >>> os.environ["HF_HUB_OFFLINE"] = "1"; offline()
    True
    >>> del os.environ["HF_HUB_OFFLINE"]
    """
    return any(os.environ.get(name, "").strip().lower() in ("1", "on", "yes", "true")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_problem(model: str, timeout_s: float = HUB_CHECK_S) -> str | None:
    """Why the hub id ``model`` cannot be loaded here (one line), or None when it can (module docstring)."""
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    head = f"model {model}: no folder of that name here"
    try:
        if isinstance(huggingface_hub.try_to_load_from_cache(model, "config.json"), str):
            return None
    except ValueError as exc:  # huggingface_hub's HFValidationError: not spelt as a hub id
        return f"{head}, nor a hub id ({(str(exc).splitlines() or [''])[0]})"
    if offline():
        return f"{head}, and not in the hub's cache while HF_HUB_OFFLINE is set"
    try:
        huggingface_hub.HfApi().model_info(model, timeout=timeout_s)
    except GatedRepoError:
        return None  # there; the engine's own token decides
    except RepositoryNotFoundError:
        return f"{head}, nor on the hub"
    except Exception as exc:  # the hub cannot be reached: no name resolves, a timeout, a proxy's refusal
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"{head}, and the hub cannot be reached to fetch it ({reason})"
    return None
