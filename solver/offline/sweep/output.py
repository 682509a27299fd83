"""A sweep written out: sweep.csv, sweep.md, sweep.yaml and the PNG plots; and read back."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from solver.files import atomic_write
from solver.runlog import markdown_table
from solver.offline.sweep.spec import NO_STOPPER, SweepError, SweepSpec, spec_to_dict

if TYPE_CHECKING:  # pandas and matplotlib are imported inside the functions that need them (slow imports)
    import pandas as pd
    from matplotlib.figure import Figure

CSV_NAME = "sweep.csv"
MARKDOWN_NAME = "sweep.md"
SPEC_NAME = "sweep.yaml"
PLOTS = ("accuracy_vs_reps.png", "runtime_vs_workers.png", "accuracy_vs_cost.png")


def _setting_label(row: Any, varying: Sequence[str]) -> str:
    parts = [f"{key}={row[key]}" for key in varying]
    return ", ".join(parts) or "majority"


def _varying(df: pd.DataFrame, keys: Sequence[str] = ("temperature", "prompt", "voter", "stopper")) -> list[str]:
    return [k for k in keys if df[k].nunique() > 1]


def _groups_at_most_workers(df: pd.DataFrame) -> tuple[list[str], list[pd.DataFrame]]:
    """The rows at the largest worker count, one group per setting (sorted by N), and the columns that vary."""
    at = df[df["workers"] == df["workers"].max()]
    varying = _varying(at)
    groups = at.groupby(varying, sort=False) if varying else [((), at)]
    return varying, [group.sort_values("reps") for _, group in groups]


def plot_accuracy(df: pd.DataFrame) -> Figure:
    """Majority accuracy (line, 95 % band), pass@N (dotted) and mean repetition accuracy (dashed) against N,
    at the largest worker count."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    varying, groups = _groups_at_most_workers(df)
    for number, group in enumerate(groups):
        colour = f"C{number % 10}"
        label = _setting_label(group.iloc[0], varying)
        ax.plot(group["reps"], 100 * group["accuracy"], marker="o", color=colour, label=label)
        ax.fill_between(group["reps"], 100 * group["accuracy_low"], 100 * group["accuracy_high"], color=colour,
                        alpha=0.12, linewidth=0)
        ax.plot(group["reps"], 100 * group["pass_at_n"], linestyle=":", color=colour)
        ax.plot(group["reps"], 100 * group["rep_accuracy"], linestyle="--", color=colour, alpha=0.7)
    import pandas as pd

    at = pd.concat(groups) if groups else df.iloc[:0]
    reps = sorted(at["reps"].unique())
    ax.set_xscale("log", base=2)
    ax.set_xticks(reps, [str(r) for r in reps])
    ax.set_ylim(-2, 102)
    ax.set_xlabel("repetitions per problem (N)")
    ax.set_ylabel("accuracy (%)")
    problems = int(at["graded"].max()) if len(at) else 0
    ax.set_title(f"Accuracy vs repetitions ({problems} graded problems, band = 95 % Wilson)")
    ax.grid(alpha=0.3)
    settings = ax.legend(fontsize="small", loc="upper left", title="setting")
    ax.add_artist(settings)
    styles = [Line2D([], [], color="grey", marker="o", label="majority vote"),
              Line2D([], [], color="grey", linestyle=":", label="pass@N (any repetition right)"),
              Line2D([], [], color="grey", linestyle="--", label="single repetition")]
    ax.legend(handles=styles, fontsize="small", loc="lower right")
    return fig


def plot_runtime(df: pd.DataFrame) -> Figure:
    """Simulated runtime (lines per N) and measured runtime (crosses) against workers; throughput beside it."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    first = df.iloc[0] if len(df) else None
    base = df
    if first is not None:  # one generation setting and no stopper: the plain cost of N repetitions
        base = df[(df["temperature"] == first["temperature"]) & (df["prompt"] == first["prompt"])
                  & (df["voter"] == first["voter"])]
        if (base["stopper"] == NO_STOPPER).any():
            base = base[base["stopper"] == NO_STOPPER]
        else:
            base = base[base["stopper"] == base["stopper"].iloc[0]]
    for number, (reps, group) in enumerate(base.groupby("reps")):
        group = group.sort_values("workers")
        left.plot(group["workers"], group["runtime_s"], marker="o", color=f"C{number % 10}",
                  label=f"N={reps} (simulated)")
    measured = base.dropna(subset=["runtime_measured_s"]).sort_values("workers")
    if len(measured):
        left.plot(measured["workers"], measured["runtime_measured_s"], linestyle="none", marker="x",
                  markersize=10, color="black", label=f"N={int(measured['reps'].max())} (measured)")
        right.plot(measured["workers"], measured["tokens_per_s"], marker="s", color="C0")
    workers = sorted(df["workers"].unique())
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers, [str(w) for w in workers])
        ax.set_xlabel("workers (repetitions in flight)")
        ax.grid(alpha=0.3)
    left.set_ylabel("runtime for the set (s)")
    left.set_title("Runtime vs workers")
    left.set_ylim(bottom=0)
    left.legend(fontsize="small")
    right.set_ylabel("generated tokens per second")
    right.set_title("Engine throughput (measured runs)")
    right.set_ylim(bottom=0)
    return fig


def plot_cost(df: pd.DataFrame) -> Figure:
    """Accuracy against repetitions actually used: what each stopping rule saves and what it costs."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.8), layout="constrained")
    ax = fig.add_subplot()
    varying, groups = _groups_at_most_workers(df)
    for number, group in enumerate(groups):
        label = _setting_label(group.iloc[0], varying)
        ax.plot(group["reps_used"], 100 * group["accuracy"], marker="o", color=f"C{number % 10}", label=label)
        for _, row in group.iterrows():
            ax.annotate(f"N={row['reps']}", (row["reps_used"], 100 * row["accuracy"]), fontsize="x-small",
                        textcoords="offset points", xytext=(4, 4))
    ax.set_xlabel("repetitions used per problem (mean)")
    ax.set_ylabel("majority accuracy (%)")
    ax.set_ylim(-2, 102)
    ax.set_title("Accuracy vs cost")
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    return fig


def render_markdown(df: pd.DataFrame, spec: SweepSpec) -> str:
    """The sweep as a markdown page: the settings table, the plots and how they were measured."""
    def num(value: float, digits: int = 1, scale: float = 1.0) -> str:
        return "-" if math.isnan(value) else f"{scale * value:.{digits}f}"

    rows = []
    for _, r in df.iterrows():
        interval = f"[{num(r['accuracy_low'], 0, 100)}–{num(r['accuracy_high'], 0, 100)}]"
        rows.append([r["temperature"], r["prompt"], r["voter"], r["stopper"], r["workers"], r["reps"],
                     f"{num(r['accuracy'], 1, 100)} {interval}",
                     num(r["rep_accuracy"], 1, 100), num(r["pass_at_n"], 1, 100), num(r["reps_used"], 2),
                     num(r["runtime_s"]), num(r["runtime_measured_s"]), num(r["tokens"], 0),
                     num(r["executions"], 1), num(r["tokens_per_s"])])
    table = markdown_table(
        ["T", "prompt", "voter", "stopper", "W", "N", "majority % [95 % CI]", "single rep %", "pass@N %",
         "reps used", "runtime s (sim)", "runtime s (measured)", "tokens", "code runs", "tok/s"], rows)
    problems = int(df["problems"].max()) if len(df) else 0
    graded = int(df["graded"].max()) if len(df) else 0
    return "\n".join([
        f"# Sweep: {spec.data}", "",
        f"{problems} problems ({graded} with reference answers); repetitions {list(spec.reps)}, workers "
        f"{list(spec.workers)}; {spec.draws} random draws per problem and setting (seed {spec.seed}).", "",
        table, "",
        "![accuracy vs repetitions](accuracy_vs_reps.png)", "",
        "![runtime vs workers](runtime_vs_workers.png)", "",
        "![accuracy vs cost](accuracy_vs_cost.png)", "",
        "## How this was measured", "",
        "One generation run per temperature, prompt and worker count with the largest N and no stopping rule "
        "(`runs/`). Smaller N, voters and stopping rules are replayed offline on random orders of those "
        "repetitions (the same orders for every setting). Runtime is simulated from recorded repetition "
        "durations on W slots; the measured column is the real run. Majority accuracy is expected over the "
        "draws, with a 95 % Wilson interval over the graded problems.", ""])


def write_outputs(df: pd.DataFrame, spec: SweepSpec, out: Path) -> list[Path]:
    """sweep.csv, sweep.md, sweep.yaml (the spec) and the PNG plots in ``out``. Returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = [out / CSV_NAME, out / MARKDOWN_NAME, out / SPEC_NAME]
    atomic_write(out / CSV_NAME, df.to_csv(index=False))
    atomic_write(out / MARKDOWN_NAME, render_markdown(df, spec))
    atomic_write(out / SPEC_NAME, yaml.safe_dump(spec_to_dict(spec), sort_keys=False))
    for name, plot in zip(PLOTS, (plot_accuracy, plot_runtime, plot_cost)):
        path = out / name
        image = io.BytesIO()
        plot(df).savefig(image, format="png", dpi=110)
        atomic_write(path, image.getvalue())
        written.append(path)
    return written



def load_sweep(out: str | Path) -> pd.DataFrame:
    """The table of a finished sweep directory."""
    import pandas as pd

    path = Path(out) / CSV_NAME
    if not path.is_file():
        raise SweepError(f"no sweep results at {path}")
    return pd.read_csv(path)


def best_settings(df: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The ``top`` settings by majority accuracy, cheaper first among equals, with the columns that matter."""
    columns = ["temperature", "prompt", "voter", "stopper", "workers", "reps", "accuracy", "accuracy_low",
               "accuracy_high", "rep_accuracy", "pass_at_n", "reps_used", "runtime_s", "tokens"]
    ranked = df.sort_values(["accuracy", "runtime_s", "reps_used"], ascending=[False, True, True])
    return ranked[columns].head(top).reset_index(drop=True)
