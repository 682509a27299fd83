"""Serving the predictor through the competition's own ``kaggle_evaluation`` package.

Kaggle's relay accepts only a plain named function as an endpoint (``isinstance(f, types.FunctionType)``, no
lambda) and routes each call by the function's ``__name__``: :func:`endpoint` wraps the predictor in a function
named ``predict``. The package ships inside the competition's data (``/kaggle/input/<competition>``); off Kaggle
``gateway_dir`` points at a copy. Its two versions (AIMO2, AIMO3) differ, so one process serves one competition.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from solver.config import ConfigError
from solver.kaggle.competition import Competition
from solver.kaggle.predictor import KagglePredictor


def endpoint(predictor: Callable[..., Any]) -> types.FunctionType:
    """The plain function the relay accepts and the gateway calls by name: ``predict(id_, problem)``.

    >>> class Answering:
    ...     def __call__(self, *args): return args[0]
    >>> predict = endpoint(Answering())
    >>> predict.__name__, isinstance(predict, types.FunctionType), predict("a1", "1+1?")
    ('predict', True, 'a1')
    """

    def predict(*args: Any, **kwargs: Any) -> Any:
        return predictor(*args, **kwargs)

    return predict


def find_server(comp: Competition, gateway_dir: str | Path | None = None) -> type | None:
    """The competition's inference-server class from ``kaggle_evaluation``, or None when the package is not
    installed anywhere (off Kaggle, no ``gateway_dir``). ``gateway_dir`` (a folder holding ``kaggle_evaluation/``)
    comes first on ``sys.path``; without it, the competition's Kaggle input folder is tried. A ``gateway_dir``
    without the package, or a package that does not import, is a one-line :class:`ConfigError`."""
    if gateway_dir is not None:
        folder = Path(gateway_dir).resolve()
        if not (folder / "kaggle_evaluation" / "__init__.py").is_file():
            raise ConfigError(f"{gateway_dir} holds no kaggle_evaluation package")
        loaded = sys.modules.get("kaggle_evaluation")
        if loaded is not None and not str(getattr(loaded, "__file__", "")).startswith(str(folder)):
            raise ConfigError(f"kaggle_evaluation is already imported from {loaded.__file__}: "
                              "one competition's gateway per process")
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    elif comp.input_dir not in sys.path and Path(comp.input_dir).is_dir():
        sys.path.append(comp.input_dir)
    module_name, class_name = comp.server.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if gateway_dir is None and exc.name == "kaggle_evaluation":
            return None
        raise ConfigError(f"cannot import {module_name}: {exc}") from exc
    except ImportError as exc:
        raise ConfigError(f"cannot import {module_name}: {exc}") from exc
    server = getattr(module, class_name, None)
    if server is None:
        raise ConfigError(f"{module_name} has no {class_name}")
    return server


def serve(predictor: KagglePredictor, data: str | Path | None = None, *,
          gateway_dir: str | Path | None = None) -> None:
    """Serve ``predictor`` the Kaggle way, then close it (engine, sandbox, loop).

    With ``KAGGLE_IS_COMPETITION_RERUN`` set: the competition's inference server, until the process is stopped
    (an interrupt closes the predictor on the way out). Otherwise its local gateway over ``data`` (default: the
    test.csv beside ``kaggle_evaluation``: the competition's public one on Kaggle), which writes ``submission.parquet`` in the working directory. Without
    ``kaggle_evaluation`` (off Kaggle, no ``gateway_dir``): a one-line :class:`ConfigError`; ``solver
    kaggle-local`` rehearses without it."""
    comp = predictor.competition
    folder = comp.input_dir if gateway_dir is None else str(gateway_dir)
    csv_path = str(data) if data is not None else os.path.join(folder, "test.csv")
    try:
        server_class = find_server(comp, gateway_dir)
        if server_class is None:
            raise ConfigError(f"kaggle_evaluation not found: attach the competition's data ({comp.input_dir}) "
                              "or pass gateway_dir")
        server = server_class(endpoint(predictor))
        if os.getenv("KAGGLE_IS_COMPETITION_RERUN"):
            server.serve()
        else:
            server.run_local_gateway((csv_path,))
    finally:
        predictor.close()
