"""Offline analysis of run logs, by concern: ``sim`` (the leaderboard simulation: a Kaggle day played on recorded
repetitions), ``sweep`` (validation sweeps: generate runs, analyse them) and ``tune`` (search the settings, pick
one). Each sub-package's ``__init__`` names what outsiders may use. Recordings come in through
``solver.recordings``."""
