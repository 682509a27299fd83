"""The time model's layouts (one engine per GPU side by side, one engine over two GPUs) and the sweep's estimate
on G GPUs: each layout's figure says where it came from, a layout changes only what it measured, the queue of
problems over N engines is the driver's, and bad layout data is a one-line error."""

from __future__ import annotations

import pytest

from solver.config import Config, ConfigError, Layout, parse_layout
from solver.offline.sweep import Hardware, SweepSpec, estimate_sweep, queue_makespan
from solver.timing.model import LAYOUT_FIGURES, EngineTimeModel, LayoutFigures, from_data, load_time_model
from solver.timing.timeline import AttemptPlan, engine_timeline
from solver.types import Problem


def test_every_layout_figure_says_where_it_came_from() -> None:
    for name in ("h100-gptoss", "tiny"):
        model = load_time_model(name)
        for layout in model.layouts:
            measured = {k for k, _ in layout.figures}
            measured |= {k for k in ("time_scale", "replica_time_scale") if getattr(layout, k) != 1.0}
            assert measured <= set(layout.sources), (name, layout.name, measured - set(layout.sources))


def test_the_h100_layouts_carry_the_two_gpu_measurements() -> None:
    model = load_time_model("h100-gptoss")
    tp2 = model.for_layout(parse_layout("tp2"))
    assert tp2.cache_tokens == 4_730_000 and model.figures(parse_layout("tp2")).gpus == 2
    assert tp2.step_s[0][1] == pytest.approx(model.step_s[0][1] * 0.877)
    assert tp2.start_s == model.start_s  # not measured for TP2: the one-GPU start
    side_by_side = model.for_layout(parse_layout("replicas:2"))
    measured = 2 / 1.959  # two engine actors gave 1.959x one engine (nvidia-h200-x2, layouts.py scaling)
    assert model.figures(Layout()).replica_time_scale == pytest.approx(measured, abs=5e-4)
    assert side_by_side.step_s[0][1] == pytest.approx(model.step_s[0][1] * model.figures(Layout()).replica_time_scale)
    assert model.for_layout(Layout()).step_s == model.step_s  # one engine alone: the model as it is
    # the two-GPU figure (1.959x for two engines) is what two replicas give on even problems
    plan = [AttemptPlan((500, 2000), (3000, 3000), (2.0, 0.0))] * 8
    alone = max(engine_timeline(plan, 8, model).ends)
    two = Hardware.of(model, Layout(), 2)
    assert two.engines == 2
    pair = queue_makespan([max(engine_timeline(plan, 8, two.model).ends)] * 8, 2)[0]
    assert 8 * alone / pair == pytest.approx(1.959, rel=0.01)


@pytest.mark.parametrize("layouts, needle", [
    ({"tp2": {"gpus": 2, "colour": 1}}, "layout tp2: unknown key 'colour'"),
    ({"tp2": {"gpus": 1}}, r"layout tp2 spans 2 GPUs, not gpus 1 \(the name says it\)"),
    ({"fast": {}}, r"layout 'fast' is not tpN\[-ppN\]"),
    ({"replicas:2": {}}, "a time model's layout is one engine's"),
    ({"dp2": {}, "tp1-dp2": {}}, "layout tp1-dp2 is given twice"),
    ({"tp2": {"time_scale": 0}}, "time_scale and replica_time_scale must be > 0"),
    ({"tp2": {"cache_tokens": "many"}}, "not a number"),
    ({"tp2": [1, 2]}, "layout tp2 must be a mapping"),
    ([1], "layouts must map layout names"),
])
def test_bad_layout_data_is_one_line(layouts, needle) -> None:
    with pytest.raises(ConfigError, match=needle) as caught:
        from_data({"name": "m", "step_s": {1: 0.01}, "layouts": layouts}, "m")
    assert "\n" not in str(caught.value)


def test_gpus_that_hold_no_engine_of_the_layout_are_an_error() -> None:
    model = load_time_model("h100-gptoss")
    with pytest.raises(ConfigError, match="spans 2 GPUs per engine; 1 GPU holds none"):
        Hardware.of(model, parse_layout("tp2"), 1)
    assert Hardware.of(model, parse_layout("tp2"), 5).engines == 2  # a fifth GPU holds no third engine


def test_the_estimate_hands_problems_out_like_the_driver_and_counts_engine_starts() -> None:
    model = EngineTimeModel("m", ((1, 0.01), (8, 0.01)), start_s=30.0,
                            layouts=(LayoutFigures(Layout(), replica_time_scale=1.5,
                                                   sources={"replica_time_scale": "test"}),))
    short, long = AttemptPlan((10,), (100,), (0.0,)), AttemptPlan((10,), (1000,), (0.0,))
    problems = [Problem(f"p{i}", "") for i in range(4)]
    shapes = {"p0": [long], "p1": [short], "p2": [short], "p3": [short]}
    spec = SweepSpec("x", reps=(2,), workers=(1, 2))
    one = estimate_sweep(spec, Config(), problems, shapes, Hardware.of(model, Layout(), None), cluster=False)
    # one engine: every problem in turn; W=1 runs the two attempts one after the other
    assert [r.solve_s for r in one.runs] == pytest.approx([2 * (10 + 1 + 1 + 1), 10 + 1 + 1 + 1])
    assert one.starts == 2 and one.total_s == pytest.approx(2 * 30 + 26 + 13)
    two = estimate_sweep(spec, Config(), problems, shapes, Hardware.of(model, Layout(), 2), cluster=True)
    # two engines, each 1.5x slower: p0 (15 s at W=2) on one, p1..p3 (1.5 s each) on the other
    assert two.runs[1].solve_s == pytest.approx(15.0) and two.starts == 1
    assert any("2 engines of 1 GPU" in line for line in two.lines())


def test_layout_figures_are_the_models_own_keys() -> None:
    assert set(LAYOUT_FIGURES) <= set(EngineTimeModel.__dataclass_fields__)


def test_the_plan_picks_replicas_for_many_problems_and_tp2_for_one_long_one() -> None:
    """On the shipped gpt-oss model: two GPUs spent on a queue of problems go to two engines (each 1.021x slower
    beside the other beats one engine 0.877x over both); one long problem alone goes to TP2 (a second engine would
    sit idle). Four GPUs: four replicas for many problems."""
    from solver.offline.sweep import fitting_layouts, pick_layout

    model = load_time_model("h100-gptoss")
    attempt = AttemptPlan((2000, 3000, 3000), (4000, 4000, 4000), (1.0, 1.0, 0.0))
    spec = SweepSpec("x", reps=(8,), workers=(8,))

    def pick(problems: int, gpus: int) -> tuple[str, str]:
        probs = [Problem(f"p{i}", "") for i in range(problems)]
        shapes = {p.id: [attempt] for p in probs}
        estimates = [estimate_sweep(spec, Config(), probs, shapes, Hardware.of(model, layout, gpus), cluster=True)
                     for layout in fitting_layouts(model, gpus)]
        best, why = pick_layout(estimates)
        assert best.total_s == min(e.total_s for e in estimates)
        return best.hardware.layout.name, why

    assert [x.name for x in fitting_layouts(model, 1)] == ["tp1"]
    assert [x.name for x in fitting_layouts(model, 2)] == ["tp1", "tp2"]
    layout, why = pick(16, 2)
    assert layout == "tp1" and "sooner than tp2" in why and "2 engines of 1 GPU, each engine second x1.021" in why
    assert pick(1, 2)[0] == "tp2"
    layout, why = pick(16, 4)
    assert layout == "tp1" and "4 engines of 1 GPU" in why and "tp2: 2 engines of 2 GPUs" in why
