"""What a run is built from, made once from its config before anything heavy starts: every name the config gives
resolved (the voter, the stoppers, the prompt template, the dialect, the engine), every path found (the model, the
time model), and the config's own cross-field rules checked (``Config.check_run``). A bad config is a one-line
``ConfigError`` (or ``ModelError``) here, before a run directory is written or an engine loads; what the solver
needs of it (its rules, its prompt template) is then handed on, not built again.

The engine opens its own model and time model when it starts (``solver.engines``: its factory takes the config);
here they are only found.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from solver.config import Config
from solver.core.state import Rules
from solver.dialects import PromptTemplate


@dataclass(frozen=True)
class RunParts:
    """A run's config and what its solvers are made of."""

    config: Config
    rules: Rules  # the voter, the stop table, the default answer, the repetitions of both rounds
    template: PromptTemplate  # the prompt every repetition starts from

    @classmethod
    def of(cls, config: Config) -> RunParts:
        """The rules and the template only (no engine, model or dialect check): for a solver made over an engine
        already running, whose config was prepared when the run started.

        >>> RunParts.of(Config()).rules.max_repetitions
        8
        """
        return cls(config, Rules.of(config), PromptTemplate.load(config.prompt.template))


def prepare_run(config: Config, *, find_model: Callable[[str | None], object] | None = None) -> RunParts:
    """Resolve and check everything ``config`` names (module docstring); the parts its solvers are made of.
    ``find_model``: how the model is found (default ``solver.models.resolve_model``; a dry run passes its own,
    which skips a model only on the machine the command is written for, solver.dryrun).

    >>> prepare_run(Config().replace({"engine.name": "replay"}))
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: the replay engine needs --from RUN_DIR
    """
    from solver.dialects import check_dialect
    from solver.dialects import check_model_dialect
    from solver.engines import factory_path

    parts = RunParts.of(config)
    check_model_dialect(config)  # a gpt-oss model with a dialect other than harmony: the preset to use, named
    check_dialect(config)  # harmony's vocabulary offline; a chat template that declares hermes's tool
    factory_path(config.engine.name)
    if config.engine.name == "vllm":
        from solver.config import check_model_named
        from solver.models import resolve_model

        check_model_named(config)  # a GPU preset's engine without --model: before the tiny model is made
        (find_model or resolve_model)(config.engine.model)  # a missing model path fails here
        if config.sampling.extra:
            from solver.engines.vllm_async import check_sampling_extra

            check_sampling_extra(config.sampling.extra)
    config.check_run()
    if config.engine.time_model:
        from solver.timing.model import load_time_model

        load_time_model(config.engine.time_model)  # an unknown name fails here, not when a replay first times a turn
    return parts
