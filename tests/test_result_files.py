"""Every result file the READMEs cite is in the repository, and the figures that had none now have one.

The convention (docs/contributing.md, "Figures and their files"): a figure that came from a run names its command and its
result file by the file's path in the repository, `benchmarks/results/NAME` or `evaluation/results/NAME` (a folder
ends in `/`). Inside `benchmarks/README.md` a bare `results/NAME` is the same folder, and so is `$R/NAME` where the
README sets `R=benchmarks/results`. `{a,b}` stands for each of its names, a brace without a comma (a format field,
`{f}`) and `*` for any name; each path must match at least one file. Pure file reading: nothing is run here.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READMES = ("README.md", "benchmarks/README.md", "evaluation/README.md", "kaggle/README.md", "docs/gptoss-h100.md",
           "docs/reference.md")
# A cited path: a results folder named from the root, from `$R`, or bare; the lookbehind keeps the tail of a longer
# path (`$OUT/results/`, `benchmarks/results/`) from counting again as a bare one. The path ends on a name character,
# `*`, `}` or `/`, so a sentence's comma, full stop or closing bracket is not part of it.
CITATION = re.compile(
    r"(?<![\w$./-])(?:(?P<root>(?:benchmarks|evaluation)/results)|(?P<var>\$R)|(?P<bare>results))"
    r"/(?P<rest>(?:[\w.*,/-]|\{[\w.,*-]*\})*(?:[\w*/]|\{[\w.,*-]*\}))?"
)
R_SET = "R=benchmarks/results"
FLOOR = 65  # citations found today (71) are more than this; a parser that stops finding them fails here, not silently


@dataclass(frozen=True)
class Citation:
    """One result path as a README writes it, the line it is on and the repository path pattern it stands for."""

    readme: str
    line: int
    text: str
    pattern: str


def expand(pattern: str) -> list[str]:
    """The patterns a path with `{a,b}` groups stands for (bash's brace expansion; a group without a comma is a
    format field and stands for any name).

    >>> expand("h200_day-{a-cold,b-warmup}.json")
    ['h200_day-a-cold.json', 'h200_day-b-warmup.json']
    >>> expand("h200_check-{f}.json"), expand("cpu_*")
    (['h200_check-*.json'], ['cpu_*'])
    >>> expand("x{1,2}-{a,b}")
    ['x1-a', 'x1-b', 'x2-a', 'x2-b']
    """
    match = re.search(r"\{([^{}]*)\}", pattern)
    if match is None:
        return [pattern]
    head, tail = pattern[: match.start()], pattern[match.end():]
    options = match.group(1).split(",") if "," in match.group(1) else ["*"]
    return [out for option in options for out in expand(head + option + tail)]


def citations(readme: str, text: str) -> list[Citation]:
    """Every result path cited in a README's text, resolved to a pattern from the repository's root.

    >>> [c.pattern for c in citations("benchmarks/README.md",
    ...     "raw: `results/a.json`, $R/b.json, benchmarks/results/c_*.json. See evaluation/results/sim/ (x).")]
    ['benchmarks/results/a.json', 'benchmarks/results/b.json', 'benchmarks/results/c_*.json', 'evaluation/results/sim/']
    >>> [c.pattern for c in citations("README.md", "`$OUT/results/x.json` and results/y.json")]
    ['results/y.json']
    """
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        for match in CITATION.finditer(line):
            rest = match.group("rest") or ""
            if match.group("root"):
                base = match.group("root")
            elif match.group("var") or readme != "README.md":
                base = "benchmarks/results" if match.group("var") else str(Path(readme).parent / "results")
            else:
                base = "results"
            found.append(Citation(readme, number, match.group(0), f"{base}/{rest}"))
    return found


def resolves(pattern: str) -> bool:
    """True when every pattern the path stands for matches a file (a folder: one that holds a file).

    >>> seeds = "benchmarks/results/h200x2_seed-8b-tp"
    >>> resolves(seeds + "{1,2}.json"), resolves(seeds + "{1,3}.json"), resolves("results/cpu_*")
    (True, False, False)
    >>> resolves("evaluation/results/tune-levers/"), resolves("evaluation/results/no-such-run/")
    (True, False)
    """
    for one in expand(pattern):
        if one.endswith("/"):
            folder = ROOT / one
            if not (folder.is_dir() and any(p.is_file() for p in folder.rglob("*"))):
                return False
        elif not any(p.is_file() for p in ROOT.glob(one)):
            return False
    return True


def all_citations() -> list[Citation]:
    return [c for readme in READMES for c in citations(readme, (ROOT / readme).read_text(encoding="utf-8"))]


@pytest.mark.parametrize("readme", READMES)
def test_every_cited_result_file_is_in_the_repository(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    cited = citations(readme, text)
    missing = [f"{c.readme}:{c.line}: {c.text} ({c.pattern})" for c in cited if not resolves(c.pattern)]
    assert not missing, "cited result files missing:\n" + "\n".join(missing)
    if any(c.text.startswith("$R/") for c in cited):
        assert R_SET in text, f"{readme} cites $R/... without setting {R_SET}"


def test_the_citations_are_found():
    assert len(all_citations()) > FLOOR


FOLDERS = {"benchmarks/results/", "evaluation/results/"}  # named whole where the convention is stated: no citation


def cited(readme: str, path: str) -> bool:
    """True when the README cites ``path`` itself, by a pattern that matches it or by a run's folder that holds it."""
    return any(c.readme == readme and one not in FOLDERS and (fnmatch(path, one) or one.endswith("/")
                                                             and path.startswith(one))
               for c in all_citations() for one in expand(c.pattern))


def layouts_ratio(path: Path) -> float:
    """replicas:2's decoded tokens per second over one engine's, from a `layouts.py scaling --json` file."""
    rows = {row["layout"]: row["decoded"] / row["seconds"] for row in json.loads(path.read_text())["layouts"]}
    return rows["replicas:2"] / rows["one"]


def test_two_gpu_scaling_has_its_raw_run():
    """The 1.959x that `replica_time_scale` (2 / 1.959) rests on is the committed raw run's own ratio."""
    path = "benchmarks/results/h200x2_layouts-scaling-one-replicas2.json"
    assert cited("benchmarks/README.md", path)
    assert f"{layouts_ratio(ROOT / path):.3f}" == "1.959"
    assert "**1.959**" in (ROOT / "benchmarks/README.md").read_text(encoding="utf-8")


# The figures that had no file: (README, result file, [(as the README writes it, as the file writes it)]). Each file
# must be cited by that README, and each figure must stand in both.
FIGURES = [
    ("evaluation/README.md", "evaluation/results/real-attempts/replay_check-8.txt",
     [("+5.9 … +18.3 %", "+5.9%"), ("+5.9 … +18.3 %", "+18.3%"),
      ("4 of 8 stopped alike", "stopped alike: 4 of 8")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay_check-8-max400.txt",
     [("+2.5 … +18.4 %", "+2.5%"), ("+2.5 … +18.4 %", "worst time gap 18.4%"),
      ("7 of 8 alike", "stopped alike: 7 of 8")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay_check-8-run2.txt",
     [("+0.1 … +3.8 %", "+0.1%"), ("+0.1 … +3.8 %", "+3.8%"), ("8 of 8 with both commands", "stopped alike: 8 of 8"),
      ("ran 13.9 % shorter in the replay", "| 373.9 | 321.8 | -13.9% | deadline / deadline |")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay_check-8-max400-run2.txt",
     [("+1.1 … +3.8 % in all", "+1.1%"), ("+1.1 … +3.8 % in all", "worst time gap 3.8%"),
      ("8 of 8 with both commands", "stopped alike: 8 of 8")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/import.txt",
     [("import all 328 attempts (10,485 turns, 116 MB log) | 2 min 12 s", "imported 328 attempts (10485 turns) of 53"),
      ("2 min 12 s", "wall 132.0 s"),
      ("3 attempts end at an answer", "(3 ended at an answer before the recording did)")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay-recorded-outputs.txt",
     [("| 2 min 9 s |", "wall 129.2 s"), ("majority right on 46 of 53 |", "46/53 = 86.8 %")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay-recorded-outputs-agreement.txt",
     [("328 of 328 repetitions give the recorded answer", "same answer: 328 of 328"),
      ("327 the same ids", "same ids: 327 of 328"),
      ("10,121 of 10,121 calls the recorded output", "tool calls shown the same output: 10121 of 10121")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay-preset.txt",
     [("| 2 min 7 s |", "wall 126.9 s"), ("majority right on 46 of 53;", "46/53 = 86.8 %")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/replay-preset-agreement.txt",
     [("(up to 93,775)", "of 93775 tokens"),
      ("majority right on 46 of 53; 31", "problems answered right by the replay: 46 of 53")]),
    ("evaluation/README.md", "evaluation/results/real-attempts/harmony_answers.txt",
     [("154 in the final channel, 174 in the analysis channel", "final channel on 154, in the analysis channel on 174"),
      ("321 of 328 attempts", "at the cut 321, in an earlier request 3, never 4"),
      ("output (139, right on 28), an answer phrase (17, right on 7) or nothing (18)",
       "code 139 (right 28), none 18 (right 0), phrase 17 (right 7)"),
      ("139 of 328 attempts right", "right in 139 of 328 attempts"), ("right on 30 of 53", "right on 30 of 53"),
      ("228 of 328 right", "right in 228 of 328 attempts"), ("right on 46 of 53", "right on 46 of 53"),
      ("median is 13 tokens", "median 13 tokens"), ("at least 2,262 tokens (0.02 %", ">= 2,262 tokens (0.02 %")]),
    ("README.md", "evaluation/results/demo/skip-live.txt",  # the demo's replayed part and its simulation
     [(x, x) for x in ("replayed: 56/88 right (63.6 %) · ran 1,138 of 2,640 programs: hold:0.9 ended 72 of 88 "
                       "questions early, 1,502 programs saved (2.3x fewer)",
                       "every program 30.0 62.9 % 62.5-63.6 %", "lossless 23.7 62.9 % 62.5-63.6 %",
                       "beta:0.95 17.2 62.8 % 61.4-63.6 %", "margin:3 16.0 62.4 % 61.4-63.6 %",
                       "hold:0.9 ← tune's pick 13.1 62.5 % 61.4-63.6 %",
                       "KS 0.06, mean gap -0.13 questions → agree")]),
    ("benchmarks/README.md", "benchmarks/results/cpu_sandbox.txt",
     [("| pool, one at a time | 9.7 | 20.3 | 61.0 | |", "pool, one at a time 9.7 20.3 61.0 nan"),
      ("| pool, 2 in flight | 13.3 | 24.3 | 80.8 | 15.3 |", "pool, 2 in flight 13.3 24.3 80.8 15.3"),
      ("| 593.2 | 712.5 | 1.7 | |", "python -c, one at a time 593.2 712.5 1.7 nan"),
      ("| 1291.9 | 1656.6 | 1.5 | 602.3 |", "python -c, 2 in flight 1291.9 1656.6 1.5 602.3"),
      ("Latency ratio 61×, throughput ratio 53×, CPU ratio 39×", "latency ratio (median, baseline / pool): 61x"),
      ("throughput ratio 53×", "throughput ratio (2 in flight, pool / baseline): 53x"),
      ("CPU ratio 39×; from CPU per snippet, 2 idle cores give about 131", "CPU ratio (baseline / pool): 39x; "
       "capacity of 2 idle cores: 131 snippets/s")]),
    ("benchmarks/README.md", "benchmarks/results/cpu_sessions.txt",
     [("| stateful session | 4.0 | 7.9 | 4.4 | 198.8 |", "stateful 4.0 7.9 4.4 198.8"),
      ("| accumulate | 4.3 | 48.2 | 120.0 | 2426.2 |", "accumulate 4.3 48.2 120.0 2426.2"),
      ("| ratio | 1.1× | 6.1× | 27.0× | 12.2× |",
       "call 1: 1.1x, call 8: 6.1x, call 32: 27.0x, repetition: 12.2x")]),
    ("benchmarks/README.md", "benchmarks/results/cpu_frontier/frontier.txt",
     [("| every repetition | 30 | 30.00 | 1.00× | 62.89 % | 0.00 |", "every repetition 30 30.00 1.00x 62.89 +0.00"),
      ("| 30 | 17.15 | 1.75× | 62.82 % | −0.06 |", "Adaptive-Consistency (beta:0.95) 30 17.15 1.75x 62.82 -0.06"),
      ("| 30 | 11.24 | **2.67×** | 62.42 % | −0.47 |", "chosen: hold:0.8 30 11.24 2.67x 62.42 -0.47"),
      ("(`beta:0.9`) | 30 | 15.18 | 1.98× | 62.73 % | −0.16 |", "30 15.18 1.98x 62.73 -0.16 61.4-63.6 (beta:0.9)"),
      ("(`margin:3`) | 30 | 16.00 | 1.87× | 62.54 % | −0.35 |", "30 16.00 1.87x 62.54 -0.35 61.4-63.6 (margin:3)"),
      ("(`ztest:0.1`) | 30 | 17.08 | 1.76× | 62.82 % | −0.07 |", "30 17.08 1.76x 62.82 -0.07 61.4-63.6 (ztest:0.1)"),
      ("(`esc:3`) | 30 | 19.47 | 1.54× | 62.55 % | −0.34 |", "30 19.47 1.54x 62.55 -0.34 61.4-63.6 (esc:3)"),
      ("`agree_rules` within 0.5 | 30 | 18.73 | 1.60× | 62.40 % | −0.49 |", "30 18.73 1.60x 62.40 -0.49"),
      ("| `lossless` | 30 | 23.73 | 1.26× | 62.89 % | 0.00 |", "30 23.73 1.26x 62.89 +0.00 62.5-63.6 (lossless)"),
      ("KS 0.093, mean gap −0.17 problems", "KS 0.093, mean gap -0.17 problems"),
      ("19 points, 14 of them other", "(19 points, 14 of them other rules)"),
      ("0.07 points below it (`beta:0.8` at N = 15, 7.94 repetitions, against `hold:0.8` at N = 15, 7.15)",
       "worst gap -0.07 points (beta N=15 beta:0.8 at 7.94 reps vs N=15 hold:0.8 at 7.15)"),
      ("36 of the 88 problems have 0–5 answers among their 30 samples (10 of them with a right majority)",
       "36 problems have 0-5 answers among 30 samples (10 of them a right majority)"),
      ("costs 12.3 repetitions per problem over all 88 — above the 10.0", "12.3 repetitions per problem of all 88")]),
    ("benchmarks/README.md", "benchmarks/results/cpu_stopping-aqua-futile.txt",
     [("2.92× at −1.90 points (k = 15)", "hold:0.9,futile:15 61.0% 1.90 10.26 10.26 0 2.92"),
      ("3.18× at −3.00 (k = 12)", "hold:0.9,futile:12 59.9% 3.00 9.42 9.42 0 3.18"),
      ("3.42× at −4.03 (k = 10)", "hold:0.9,futile:10 58.9% 4.03 8.77 8.77 0 3.42")]),
    ("benchmarks/README.md", "benchmarks/results/cpu_runlog_stall.txt",
     [("| on the loop | 2.46 | 0.00 | 4.73 | 0.641 | 8.30 |", "on the loop 8.30 4.73 0.126 0.641 1.64 2.46 0.00"),
      ("| off the loop | 1.74 | 1.44 | 1.11 | 0.245 | 4.32 |", "off the loop 4.32 1.11 0.127 0.245 1.49 1.74 1.44"),
      ("late in all falls 2.6×", "time stalled 2.6 x")]),
    ("docs/reference.md", "benchmarks/results/h100_engine_llama8b.json",
     [("97,112 against 79,635", '"tokens": 97112'), ("97,112 against 79,635", '"tokens": 79635')]),
    ("docs/reference.md", "evaluation/results/mathverify_agreement.txt", [("(53 of 54", "agreement: 53 of 54")]),
    ("docs/reference.md", "benchmarks/results/cpu_sandbox.txt", [("median 9.7 ms per snippet against 0.59 s", "593.2")]),
    ("evaluation/README.md", "evaluation/results/sim-retention0/summary.csv",  # mean,std of 12, 16 and 8 at once
     [("41.67 ± 1.40", "41.674,1.3999"), ("40.02 ± 1.48", "40.024,1.4805"),
      ("42.99 ± 1.21 (281 s)", "42.992,1.2078")]),
    ("evaluation/README.md", "evaluation/results/sim-retention0/report.md",
     [("286 s a problem, 0.01 cut a day", "| 286.4 | 14453 | 0.01 |"),
      ("(315 s, 1.58 cut)", "| 314.6 | 15859 | 1.58 |")]),
]


@pytest.mark.parametrize("readme, path, figures", FIGURES, ids=[Path(f[1]).name for f in FIGURES])
def test_each_figure_stands_in_its_file(readme, path, figures):
    assert cited(readme, path), f"{readme} does not cite {path}"
    # Whitespace as one space: a README wraps its lines where it likes.
    text, result = (" ".join((ROOT / p).read_text(encoding="utf-8").split()) for p in (readme, path))
    for written, recorded in figures:
        assert written in text, f"{readme} no longer says {written!r}"
        assert recorded in result, f"{path} does not hold {recorded!r}"


def table_after(text: str, marker: str) -> list[list[str]]:
    """The cells of the first markdown table after ``marker``, header and rule left out."""
    lines = text[text.index(marker):].splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def tune_cells(row: dict[str, str]) -> list[str]:
    """A `solver tune` settings.csv row as the winners' table writes it, from its second column on.

    >>> tune_cells({"mean": "42.85", "std": "1.2098", "q05": "41.0", "q95": "45.0", "tokens_per_problem": "237903.4",
    ...             "seconds_per_problem": "298.9", "run_seconds": "15092.3", "cut_per_run": "0.152",
    ...             "retried_per_run": "0.0", "bootstrapped_per_run": "32.145", "bootstrap_bias": "-1.038"})
    ['42.85 ± 1.21', '41–45', '238k', '299', '15,092', '0.15', '0.00', '32.1 (−1.04)']
    """
    v = {k: float(x) for k, x in row.items() if k in {
        "mean", "std", "q05", "q95", "tokens_per_problem", "seconds_per_problem", "run_seconds", "cut_per_run",
        "retried_per_run", "bootstrapped_per_run", "bootstrap_bias"}}
    bias = f"{v['bootstrap_bias']:.2f}".replace("-", "−")  # the README's minus sign
    return [f"{v['mean']:.2f} ± {v['std']:.2f}", f"{v['q05']:g}–{v['q95']:g}",
            f"{v['tokens_per_problem'] / 1000:.0f}k", f"{v['seconds_per_problem']:.0f}", f"{v['run_seconds']:,.0f}",
            f"{v['cut_per_run']:.2f}", f"{v['retried_per_run']:.2f}", f"{v['bootstrapped_per_run']:.1f} ({bias})"]


def test_the_winners_table_is_its_tune_run():
    """Every row of evaluation/README.md's winners' table is a setting of the committed tune run, figure for figure."""
    path = "evaluation/results/tune-levers/settings.csv"
    assert cited("evaluation/README.md", path)
    with open(ROOT / path, newline="") as f:
        settings = [tune_cells(row) for row in csv.DictReader(f)]
    rows = table_after((ROOT / "evaluation/README.md").read_text(encoding="utf-8"),
                       "**The winners' rule and the alternatives**")
    assert len(rows) >= 8
    for row in rows:
        assert row[1:] in settings, f"no setting of {path} reads {row}"


def test_the_speed_table_is_its_files():
    """evaluation/README.md's "What speed buys" table is what evaluation/levers/speed_table.py writes from the
    committed tune, winners' and every-attempt runs (and the recorded counts kept beside them), row for row, and table.md is it too."""
    import runpy

    folder = ROOT / "evaluation/results/levers-speed"
    written = runpy.run_path(str(ROOT / "evaluation/levers/speed_table.py"))["table"](ROOT / "no-such-run")   # the kept counts, not a run
    readme = (ROOT / "evaluation/README.md").read_text(encoding="utf-8")
    cells = table_after(readme, "**What speed buys, each engine at its best policy**")
    assert cells == table_after(written, "| GPU |")
    assert written == (folder / "table.md").read_text(encoding="utf-8")
    assert len(cells) == 7


def test_the_preset_replay_counts_are_its_files():
    """The preset row's counts, read off the committed outputs: repetitions cut at `length` with other ids and with
    another answer (the agreement), problems stopped on agree:4 and run to all 8 (the solve's progress lines)."""
    folder = ROOT / "evaluation/results/real-attempts"
    agreement = (folder / "replay-preset-agreement.txt").read_text(encoding="utf-8")
    progress = re.findall(r"^\[\d+/53\] [^:]+: answer \S+ \(\d+ reps, ([\w:]+)",
                          (folder / "replay-preset.txt").read_text(encoding="utf-8"), flags=re.MULTILINE)
    length = len(re.findall(r"other ids \(length", agreement))
    answer = len(re.findall(r"answer \S+ -> \S+ \(length", agreement))
    text = " ".join((ROOT / "evaluation/README.md").read_text(encoding="utf-8").split())
    assert f"{length} repetitions end at `length`" in text and f"{answer} of them with another answer" in text
    assert len(progress) == 53
    stops = f"`agree:4` stops {progress.count('agree:4')} problems, the other {progress.count('max_reps')} run all 8"
    assert stops in text


# Figures that had neither command nor file and were not re-run (each needs more than ten minutes of both CPU cores,
# or its run is gone): they stay out of the READMEs until a run with a result file brings them back.
UNBACKED = [
    ("evaluation/README.md", "median 1.9 ms"),        # tool times: `import-samples --measure-tools`, ~35 min
    ("evaluation/README.md", "3,606 s"),
    ("evaluation/README.md", "10 min 11 s"),          # the real-sandbox replay of every problem's first attempt
    ("evaluation/README.md", "1,057 of 1,287 calls"),
    ("evaluation/README.md", "−2.4 … +4.6 %"),        # the replay check before its re-run
    ("evaluation/README.md", "41.65 ± 1.40"),         # retention 0 before its re-run
]


@pytest.mark.parametrize("readme, figure", UNBACKED, ids=[f[1] for f in UNBACKED])
def test_figures_without_a_file_are_not_quoted(readme, figure):
    assert figure not in " ".join((ROOT / readme).read_text(encoding="utf-8").split())


def test_the_stopping_table_is_its_run():
    """benchmarks/README.md's stopping-rule table, row by row, is the committed `stopping.py --synthetic` output."""
    path = "benchmarks/results/cpu_stopping-synthetic.txt"
    assert cited("benchmarks/README.md", path)
    printed = {}
    for line in (ROOT / path).read_text(encoding="utf-8").splitlines():
        cells = line.split()
        if len(cells) >= 7 and cells[-6].endswith("%"):  # policy, accuracy, loss, finished, launched, tokens, saving
            accuracy, loss = cells[-6].rstrip("%") + " %", cells[-5].replace("-", "−")
            printed[cells[0]] = [accuracy, loss, cells[-4], cells[-1] + "×"]
    rows = table_after((ROOT / "benchmarks/README.md").read_text(encoding="utf-8"),
                       "| policy | accuracy | loss (points) | repetitions | saving |")
    assert len(rows) == len(printed) == 13
    for row in rows:
        key = row[0].split()[0] if "+" not in row[0] else "agree:4,beta:0.9"  # the README writes `a + b (any)`
        assert row[1:] == printed[key], f"{row} against {path}'s {printed[key]}"


def test_the_bundle_figures_are_its_file():
    """kaggle/README.md's bundle size is the committed bundle.json's: wheels, total MB, the check and the largest."""
    path = "benchmarks/results/cpu_bundle-extra-none.json"
    assert cited("kaggle/README.md", path)
    bundle = json.loads((ROOT / path).read_text(encoding="utf-8"))
    sizes = bundle["sizes_bytes"]
    largest = sorted(sizes, key=sizes.get, reverse=True)[:5]
    text = " ".join((ROOT / "kaggle/README.md").read_text(encoding="utf-8").split())
    check = "check passed" if bundle["checked"] and not bundle["problems"] else "check failed"
    assert f"{len(sizes)} wheels, {bundle['total_bytes'] / 1e6:.0f} MB, {check}" in text
    assert [name.split("-")[0] for name in largest] == ["pyarrow", "polars_runtime_32", "bpe_openai", "scipy", "numpy"]
    assert "pyarrow 55 MB, polars' runtime 54 MB, bpe_openai 42 MB, scipy 35 MB, numpy 17 MB" in text
    assert [round(sizes[name] / 1e6) for name in largest] == [55, 54, 42, 35, 17]
