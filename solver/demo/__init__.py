"""``solver demo``: a first run that shows what the solver does, in two parts.

Part 1 is live: the embedded tiny model on vLLM solves the bundled demo set (it proves the engine path; a 135M
model rarely gets the maths right). Part 2 replays real recorded samples (``corpus``: 88 AQuA questions x 30
programs by a maths model) through the same pipeline, each program run in the sandbox, with a stopping rule on,
then simulates leaderboard runs of several policies on the same samples (``solver tune``'s report). ``run`` holds
the sequence, ``display`` the live screen.
"""
