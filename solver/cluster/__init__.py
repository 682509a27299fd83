"""Scale-out on Ray: one actor per engine (its vLLM engine and sandbox pool), a driver that hands out whole
problems from a queue and is the only writer of the run log, and Ray's joblib backend for offline grids.

Ray is an optional extra (``pip install solver[cluster]``); nothing here imports it until a cluster is used.
See docs/cluster.md.
"""
