"""Offline analysis of run logs: simulation, sweeps, reports, plots, sample import."""
