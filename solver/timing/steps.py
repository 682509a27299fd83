"""The engine's decode progress under a time model, as one counter: every sequence decoding gains one token per
step, so the engine needs only the steps done so far (``steps``), who decodes and the context they hold. Pure
arithmetic, no waiting: the simulator's event loop (``solver.timing.timeline``) and the replay engine
(``solver.replay.replay_engine``) drive one each, so a replayed attempt and a simulated one progress alike.

Between two changes (a sequence joining or leaving, a prefill), B sequences decode holding S0 + B·n context tokens
after n more steps, so the n steps take ``p·n + q·n²/2`` seconds with ``p = step_s(B) + context_s·S0`` and
``q = context_s·B`` (the context grows by B tokens a step). A prefill holds every sequence until it is done.
"""

from __future__ import annotations

import math

from solver.timing.model import EngineTimeModel


class StepCounter:
    """Decode steps against model seconds for one engine.

    >>> from solver.timing.model import EngineTimeModel
    >>> clock = StepCounter(EngineTimeModel("m", ((1, 0.01), (2, 0.01))))
    >>> a = clock.join(100)
    >>> clock.time_of(a + 50)          # one sequence: 50 steps of 10 ms
    0.5
    >>> clock.advance(0.2); b = clock.join(100); round(clock.steps, 6)
    20.0
    >>> round(clock.time_of(a + 50), 6)  # two decode at once: still 10 ms a step here
    0.5
    >>> _ = clock.stall(0.1); round(clock.time_of(a + 50), 6)  # a prefill holds both
    0.6
    """

    __slots__ = ("model", "time", "steps", "busy_until", "decoding", "context_base")

    def __init__(self, model: EngineTimeModel, time: float = 0.0) -> None:
        self.model = model
        self.time = time  # model seconds
        self.steps = 0.0  # decode steps done by ``time``
        self.busy_until = time  # no step before this: a prefill is running
        self.decoding = 0  # sequences in the batch
        self.context_base = 0.0  # Σ (context at join − steps at join) over the decoding sequences

    def context(self) -> float:
        """Context tokens held by the decoding sequences now."""
        return self.context_base + self.decoding * self.steps

    def _terms(self) -> tuple[float, float]:
        m = self.model
        return m.base_seconds(self.decoding) + m.context_s * self.context(), m.context_s * self.decoding

    def advance(self, to: float) -> None:
        """Move to model time ``to`` (no earlier than now), counting the steps made meanwhile."""
        if to <= self.time:
            return
        start = max(self.time, self.busy_until)
        if self.decoding and to > start:
            p, q = self._terms()
            dt = to - start
            # n solves p·n + q·n²/2 = dt, written without cancellation for small q·dt
            self.steps += 2 * dt / (p + math.sqrt(p * p + 2 * q * dt))
        self.time = to

    def time_of(self, steps: float) -> float:
        """When the step counter reaches ``steps`` if nobody joins or leaves (inf when nobody decodes)."""
        n = steps - self.steps
        if n <= 0:
            return self.time
        if not self.decoding:
            return math.inf
        p, q = self._terms()
        return max(self.time, self.busy_until) + p * n + q * n * n / 2

    def reach(self, steps: float) -> None:
        """Settle the counter at ``steps`` after advancing to ``time_of(steps)`` (float rounding)."""
        self.steps = max(self.steps, steps)

    def join(self, context: int) -> float:
        """A sequence holding ``context`` tokens starts decoding; returns the step count it started at."""
        self.decoding += 1
        self.context_base += context - self.steps
        return self.steps

    def leave(self, context: int, joined: float) -> None:
        """The sequence that joined at ``joined`` holding ``context`` tokens stops decoding."""
        self.decoding -= 1
        self.context_base -= context - joined
        if not self.decoding:
            self.context_base = 0.0  # no drift carried over an empty batch

    def stall(self, seconds: float) -> float:
        """A prefill of ``seconds`` queued after any running one; returns when it is done."""
        self.busy_until = max(self.time, self.busy_until) + seconds
        return self.busy_until

    def prefill(self, prompt: int, previous_end: int | None) -> float:
        """Admit a request: its uncached tokens (``EngineTimeModel.uncached``) are prefilled, holding the batch;
        returns when they are done."""
        tokens = self.model.uncached(prompt, previous_end, self.context())
        return self.stall(tokens / self.model.prefill_tokens_per_s)
