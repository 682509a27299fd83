"""The solve loop: what a run is made of (its parts), one repetition, one problem (workers, votes, early stop), and
a whole run (``run``: the one ``Run``, ``make_run`` that puts it together, the driver its runners plug into)."""
