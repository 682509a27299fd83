"""The measurement wing: what rehearses and measures the solver on real engines, beside the submission
(``solver.kaggle``) and the offline analysis (``solver.offline``). Only the commands and the benchmark and evaluation
scripts import it, each from the room it needs (the wing has no face of its own).

Rooms: ``day`` (a Kaggle day rehearsed on recorded attempts, ``solver day``, and its file played again on the time
model: a room with its own face); ``rehearsal`` (the submission behind a competition's gateway: ``solver
kaggle-local``); ``workload`` (recorded attempts as replay plans, forced onto a real engine, their calls answered
from the recording) and ``tool_seconds`` (the seconds their calls run: carried, measured again or fixed); ``traced``
(drawn plans the real engine follows) on ``wrapped`` (an engine around another); ``request_timeline`` (requests and
engine metrics over time); ``vllm_probes`` (single-purpose requests to vLLM); ``sim_fidelity`` (``check_replay``:
the running pipeline on the replay engine against the simulator's prediction of the same draws).
The benchmarks' drivers: ``shape`` (the real shape's options, typed and checked once, its plan and run:
``engine.py --workload real``) over ``contenders`` (its four ways to replay the attempts); ``saturation``
(``engine.py``'s raw engine, pipeline and rounds); ``scaling`` (``layouts.py``: the layouts by name, each layout's
run, the seed's probes) over ``fleet`` (its engine actors, servers, processes and GPUs).
"""
