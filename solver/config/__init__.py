"""One validated configuration: its sections (``schema``, ``policy``), the GPU layout its engine arguments ask for
(``layout``), where it comes from (``loading``: a preset, a user's file, ``--set`` overrides, and the preset and
model ``--gpu`` and its flags choose for a measuring run) and the name tables that turn its names into parts
(``registry``).

Outsiders import from here; the modules behind it are this package's own.
"""

from solver.config.layout import DEFAULT_MAX_NUM_SEQS, Layout, engine_batch, parse_layout
from solver.config.loading import (GPU_PRESET, PRESET_DIR, Choices, add_gpu_arguments, gpu_config, gpu_overrides,
                                   gpu_preset, gpu_time_model, load_config, load_preset, parse_overrides, presets,
                                   read_choices, read_config_file, save_config)
from solver.config.policy import (EVERY_REPETITION, AnswerConfig, BudgetConfig, SolveConfig, StopConfig, VoteConfig,
                                  stopper_set)
from solver.config.registry import Registry
from solver.config.schema import (SOLVER_OWNED_SAMPLING, Config, EngineConfig, PromptConfig, SamplingConfig,
                                  SandboxConfig, check_model_named, cpu_engine, from_dict,
                                  repetitions_busy)
from solver.errors import ConfigError

__all__ = ["AnswerConfig", "BudgetConfig", "Choices", "Config", "ConfigError", "DEFAULT_MAX_NUM_SEQS",
           "EngineConfig", "EVERY_REPETITION", "GPU_PRESET", "Layout", "PRESET_DIR", "PromptConfig", "Registry",
           "SOLVER_OWNED_SAMPLING", "SamplingConfig", "SandboxConfig", "SolveConfig", "StopConfig", "VoteConfig",
           "add_gpu_arguments", "check_model_named", "cpu_engine", "engine_batch", "from_dict", "gpu_config",
           "gpu_overrides", "gpu_preset", "gpu_time_model", "load_config", "load_preset", "parse_layout",
           "parse_overrides", "presets", "read_choices", "read_config_file", "repetitions_busy", "save_config",
           "stopper_set"]
