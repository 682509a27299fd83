"""The memory-pressure sampler: readings from vLLM's own metric records, the fold over a run, the sampler's
control flow (with a scripted metrics source, a double). The real CPU engine under a KV cache too small for its
requests is one ``solver solve`` run's (tests/loop/test_engine_real.py: it preempts, loses no repetition and
reports the peak), one engine start; ``benchmarks/pressure.py`` measures the same on a GPU."""

from __future__ import annotations

import asyncio

import pytest

from solver.engines import vllm_metrics
from solver.engines.vllm_metrics import UsageReading, Usage, UsageSampler, fold, reading



def test_reading_takes_vllms_own_metric_records() -> None:
    pytest.importorskip("vllm")  # vLLM's own metric record classes
    from vllm.v1.metrics.reader import Counter, Gauge, Histogram

    labels = {"model_name": "m", "engine": "0"}
    records = [
        Gauge(name="vllm:kv_cache_usage_perc", labels=labels, value=0.625),
        Counter(name="vllm:num_preemptions", labels=labels, value=4),
        Gauge(name="vllm:num_requests_running", labels=labels, value=12.0),
        Gauge(name="vllm:num_requests_waiting", labels=labels, value=3.0),
        Histogram(name="vllm:request_num_preemptions", labels=labels, count=2, sum=4.0, buckets={}),
        Counter(name="vllm:generation_tokens", labels=labels, value=999),
    ]
    assert reading(records) == UsageReading(kv_usage=0.625, preemptions=4, running=12, waiting=3)


def test_the_names_read_are_the_ones_the_installed_vllm_registers() -> None:
    pytest.importorskip("vllm")  # reads the installed vLLM's source
    import inspect

    from vllm.v1.metrics import loggers

    source = inspect.getsource(loggers)
    for name in (vllm_metrics.KV_USAGE, vllm_metrics.PREEMPTIONS, vllm_metrics.RUNNING, vllm_metrics.WAITING):
        assert f'"{name}"' in source, name


@pytest.mark.parametrize(("readings", "expected"), [
    # peak kept though usage fell; preemptions counted from the baseline's 5
    ([UsageReading(0.3, 5, 4, 0), UsageReading(0.99, 8, 16, 6), UsageReading(0.2, 11, 2, 0)],
     Usage(0.99, 0.2, 6, 16, 6, 3)),
    # no pressure: nothing preempted
    ([UsageReading(0.1, 5, 1, 0)], Usage(0.1, 0.1, 0, 1, 0, 1)),
])
def test_fold_regression_table(readings: list[UsageReading], expected: Usage) -> None:
    assert fold(UsageReading(0.0, 5, 0, 0), readings) == expected


def test_sampler_polls_while_the_run_goes_on_and_reads_once_more_at_the_end() -> None:
    script = iter([UsageReading(0.0, 2, 0, 0),  # baseline, on entry
                   UsageReading(0.5, 2, 8, 0), UsageReading(1.0, 3, 8, 4), UsageReading(0.7, 6, 8, 2)])
    last = UsageReading(0.0, 9, 0, 0)
    calls = []

    def scripted() -> UsageReading:  # a double for vLLM's metrics: the sequence a run under pressure produces
        r = next(script, last)
        calls.append(r)
        return r

    async def run() -> Usage:
        sampler = UsageSampler(interval_s=0.01, read=scripted)
        async with sampler:
            await asyncio.sleep(0.2)
        return sampler.usage

    usage = asyncio.run(run())
    assert usage.kv_peak == 1.0 and usage.kv_last == 0.0
    assert usage.preemptions == 7  # 9 at the end minus 2 before the run
    assert usage.running_peak == 8 and usage.waiting_peak == 4
    assert usage.samples == len(calls) - 1  # every poll but the baseline


def test_engine_usage_reports_for_in_process_vllm_only() -> None:
    lines: list[str] = []
    polls: list[str] = []

    def scripted() -> UsageReading:  # a double for vLLM's metrics
        polls.append("poll")
        return UsageReading(0.5, len(polls), 2, 0)

    async def run(name: str) -> None:
        async with vllm_metrics.engine_usage(name, lines.append, read=scripted, interval_s=0.01):
            await asyncio.sleep(0.05)

    asyncio.run(run("openai"))
    assert lines == [] and polls == []  # a server's metrics are not in this process: nothing read, nothing said
    asyncio.run(run("vllm"))
    assert len(lines) == 1 and lines[0].startswith("engine: KV cache peak 50.0 %, preemptions ")


def test_engine_usage_reports_when_the_run_fails_too() -> None:
    lines: list[str] = []

    async def run() -> None:
        async with vllm_metrics.engine_usage("vllm", lines.append, read=lambda: UsageReading(1.0, 3, 1, 0),
                                             interval_s=0.01):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run())
    assert lines == ["engine: KV cache peak 100.0 %, preemptions 0, running peak 1, waiting peak 0 (1 samples)"]  # the read on exit
