"""Runs the notebook's code path in its own process, for the real-gateway tests:

    python gateway_driver.py COMPETITION GATEWAY_DIR TEST_CSV REPORT_JSON --engine tiny|scripted [--notebook SETTINGS]

builds a ``KagglePredictor`` and calls ``solver.kaggle.serve`` with the competition's real ``kaggle_evaluation``
(the local gateway in the working directory, or ``.serve()`` when ``KAGGLE_IS_COMPETITION_RERUN`` is set, until
SIGINT); with ``--notebook`` the scripted engine serves the config that the shipped notebook's cells build under
the settings in the file SETTINGS (``notebook_settings``). Then it writes REPORT_JSON: the predictor's call records,
its engine builds, the wall time, the pids of every process started under this one while serving, and those still
alive after serving ended."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent))  # kaggle_doubles.py


def watch_children(seen: set[int], stop: threading.Event) -> None:
    """Every process started under this one while serving, sampled every 0.2 s."""
    me = psutil.Process()
    while not stop.is_set():
        try:
            seen.update(child.pid for child in me.children(recursive=True))
        except psutil.Error:
            pass
        stop.wait(0.2)


# multiprocessing's resource tracker lives as long as the process that started it (it exits when that process's
# end of its pipe closes): not something serving left behind. The test checks it is gone after this one exits.
RUNTIME_HELPERS = ("multiprocessing.resource_tracker",)


def alive(pids: set[int]) -> list[str]:
    out = []
    for pid in sorted(pids):
        try:
            process = psutil.Process(pid)
            label = " ".join(process.cmdline())
            if process.status() != psutil.STATUS_ZOMBIE and not any(h in label for h in RUNTIME_HELPERS):
                out.append(f"{pid} {label[:120]}")
        except psutil.Error:
            continue
    return out


NOTEBOOK = Path(__file__).resolve().parents[2] / "kaggle" / "submission.ipynb"


def notebook_settings(settings: Path):
    """The config the shipped submission notebook builds: its settings cell, then ``settings`` (a cell of the
    test's, as a user edits the settings), then its predictor cell, run as the notebook runs them (its install and
    serve cells left out). The predictor that cell builds starts no engine before its first call; it is closed, and
    its config is served here by a scripted engine."""
    import nbformat

    cells = {tag: cell.source for cell in nbformat.read(NOTEBOOK, as_version=4).cells
             for tag in cell.metadata.get("tags", [])}
    namespace: dict = {}
    for source in (cells["settings"], settings.read_text(), cells["predictor"]):
        exec(compile(source, str(NOTEBOOK), "exec"), namespace)
    namespace["predictor"].close()
    return namespace["config"]


def main() -> int:
    comp, gateway_dir, data, report = sys.argv[1:5]
    engine = sys.argv[sys.argv.index("--engine") + 1]
    from solver.kaggle import KagglePredictor, PredictorOptions, serve

    if engine == "tiny":
        from kaggle_doubles import tiny_engine_config

        predictor = KagglePredictor(tiny_engine_config(problems=3), comp, PredictorOptions(run_dir=Path("run")))
    else:
        from kaggle_doubles import FaultyScriptedEngine, fast_config, scripted_factory

        factory, _ = scripted_factory([FaultyScriptedEngine(lambda r: "answer", answer="2042")])
        config = notebook_settings(Path(sys.argv[sys.argv.index("--notebook") + 1])) if "--notebook" in sys.argv \
            else fast_config()
        predictor = KagglePredictor(config, comp, PredictorOptions(run_dir=Path("run"), open_session=factory))
    seen: set[int] = set()
    stop = threading.Event()
    watcher = threading.Thread(target=watch_children, args=(seen, stop), daemon=True)
    watcher.start()
    started = time.monotonic()
    interrupted = False
    try:
        serve(predictor, data, gateway_dir=gateway_dir)
    except KeyboardInterrupt:  # how the rerun test ends .serve()
        interrupted = True
    seconds = time.monotonic() - started
    stop.set()
    watcher.join()
    deadline = time.monotonic() + 30.0  # processes that are exiting get 30 s
    left = alive(seen)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = alive(seen)
    Path(report).write_text(json.dumps({
        "calls": [dataclasses.asdict(c) for c in predictor.calls], "builds": predictor.builds,
        "seconds": seconds, "interrupted": interrupted, "children_seen": sorted(seen), "left": left,
        "rerun": bool(os.getenv("KAGGLE_IS_COMPETITION_RERUN"))}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
