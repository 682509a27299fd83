"""What the submission notebook pays to import the Kaggle package: the solver's modules it loads, pinned. The day
rehearsal and the local gateway runs are the measurement wing's, so importing the submission loads none of them."""

from __future__ import annotations

import subprocess
import sys

# ``import solver.kaggle`` loaded 52 of the solver's modules before the day rehearsal moved in (74 with it): the
# config, the core, the dialects, the loop, the run log and the package's own; 53 with the notebook's settings cell
# as one config (``solver.kaggle.settings``, no import of its own beyond the config); 54 with the dialects' fit to the
# model (``solver.dialects.fit``, on their face: the run's preparation refuses a preset whose dialect does not fit).
# More is a regression to explain.
KAGGLE_MODULES = 54

COUNT = ("import sys, solver.kaggle; "
         "print('\\n'.join(sorted(m for m in sys.modules if m == 'solver' or m.startswith('solver.'))))")


def test_importing_the_submission_loads_at_most_its_pinned_modules_and_nothing_that_measures():
    done = subprocess.run([sys.executable, "-c", COUNT], capture_output=True, text=True, check=True)
    loaded = done.stdout.split()
    assert not [m for m in loaded if m.startswith(("solver.measure", "solver.commands", "solver.offline",
                                                    "solver.recordings", "solver.replay", "solver.sandbox"))]
    assert len(loaded) <= KAGGLE_MODULES, f"{len(loaded)} modules: {loaded}"
