"""The vLLM compatibility module: every vLLM name the project uses resolves in the installed version, the
version is inside the supported range that the gpu extra states, and the calls that differ between versions
work in both shapes."""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import pytest

from solver.engines import vllm_compat

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("entry", vllm_compat.ENTRY_POINTS)
def test_every_vllm_entry_point_the_project_uses_resolves_in_the_installed_version(entry: str) -> None:
    pytest.importorskip("vllm")  # resolves names in the installed vLLM
    assert vllm_compat.resolve(entry) is not None


def test_the_installed_vllm_is_inside_the_supported_range() -> None:
    vllm = pytest.importorskip("vllm")  # the installed vLLM's version

    assert vllm_compat.version_problem(vllm.__version__) is None, vllm.__version__


def test_the_gpu_extra_states_the_supported_range() -> None:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert extras["gpu"] == [f"vllm{vllm_compat.SUPPORTED_RANGE}"]


def test_the_engine_calls_pass_arguments_the_installed_version_takes() -> None:
    pytest.importorskip("vllm")  # the installed vLLM's signatures
    generate = inspect.signature(vllm_compat.resolve("vllm.v1.engine.async_llm:AsyncLLM.generate")).parameters
    assert {"request_id", "priority"} <= set(generate)
    shutdown = inspect.signature(vllm_compat.resolve("vllm.v1.engine.async_llm:AsyncLLM.shutdown")).parameters
    assert "timeout" in shutdown


class _OutputProcessor:
    def get_num_unfinished_requests(self) -> int:
        return 3


class AsyncLLM026Shape:
    """A double of vLLM 0.26's AsyncLLM for this one call: no get_num_unfinished_requests of its own."""

    output_processor = _OutputProcessor()


class AsyncLLMCurrentShape(AsyncLLM026Shape):
    """A double of 0.32+: the method exists (and returns the output processor's count)."""

    def get_num_unfinished_requests(self) -> int:
        return 5


def test_num_unfinished_requests_works_on_both_shapes() -> None:
    assert vllm_compat.num_unfinished_requests(AsyncLLM026Shape()) == 3
    assert vllm_compat.num_unfinished_requests(AsyncLLMCurrentShape()) == 5


def test_the_engine_module_calls_version_dependent_names_only_through_the_compat_module() -> None:
    source = (ROOT / "solver" / "engines" / "vllm_async.py").read_text()
    assert "get_num_unfinished_requests" not in source


def test_the_vllm_engine_counts_running_requests_on_the_026_shape() -> None:
    """vLLM 0.26 has no AsyncLLM.get_num_unfinished_requests: calling it raised AttributeError mid-run."""
    from solver.engines.vllm_async import VllmEngine

    assert VllmEngine(AsyncLLM026Shape(), None).running_requests() == 3


def test_streaming_input_is_used_only_where_each_turn_keeps_its_own_length() -> None:
    vllm = pytest.importorskip("vllm")  # the installed vLLM's version

    from solver.engines.vllm_compat import streaming_input_class, streaming_input_exact

    assert not streaming_input_exact("0.26.0")  # caps every turn at the first turn's max_tokens
    assert streaming_input_exact("0.32.0") and streaming_input_exact("0.33.2")
    assert (streaming_input_class() is not None) == streaming_input_exact(vllm.__version__)
