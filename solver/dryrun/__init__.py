"""``--dry-run`` for every command and benchmark: a command parsed, planned and checked as written, nothing heavy
started (``plan``: :class:`DryRun`, the inputs only the target machine has). A room of its own below the commands
and the measurement wing, so a command's dry run loads none of the wing."""

from solver.dryrun.plan import DryRun, engine_dry_run, ignored, inside, machine_only

__all__ = ["DryRun", "engine_dry_run", "ignored", "inside", "machine_only"]
