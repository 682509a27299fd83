"""How long an engine takes: a measured time model per named engine setting (data in ``solver/timing/data``), the
engine's decode progress under it (``clock``), and one problem's attempts played on it (``timeline``). The
simulator and the replay engine both time attempts with it, so a replayed run and its simulation agree."""
