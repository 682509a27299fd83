"""The solve loop: what a run is made of (its parts), one repetition, one problem (workers, votes, early stop), a
whole run."""
