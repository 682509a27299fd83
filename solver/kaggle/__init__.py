"""The Kaggle submission: the ``predict`` adapter and the competition gateway glue."""
