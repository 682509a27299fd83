"""The solve loop: one repetition, one problem (workers, votes, early stop), a whole run."""
