"""DeepConf-style confidence (pure): per-token top-k logprobs into confidences, sliding-window group confidences
and the online filter's threshold (DeepConf, 2025). The repetition loop's online filter and the offline tools use
the same :class:`ConfidenceWindow`."""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

import numpy as np


def token_confidence(top_logprobs: Sequence[float]) -> float:
    """Minus the mean of one token's top-k logprobs: high when the model was sure (DeepConf, 2025).

    >>> round(token_confidence([-0.1, -3.0, -5.9]), 9)
    3.0
    """
    if not top_logprobs:
        raise ValueError("token_confidence needs at least one logprob")
    # Plain Python: it runs once per streamed token, where numpy's per-call overhead dominates.
    return -sum(top_logprobs) / len(top_logprobs)


class ConfidenceWindow:
    """The one sliding-window group confidence (DeepConf): the mean of the last ``size`` token confidences,
    updated token by token, and the lowest such mean so far. The online filter (the repetition loop) and the
    offline tools use this same class.

    ``lowest_full`` is the lowest mean over full windows (None until ``size`` tokens arrived): the online filter
    compares only full windows, so a trace is never cut on its first few tokens. ``lowest`` is the trace's
    group confidence: ``lowest_full``, or the mean of all its tokens when it is shorter than one window.

    >>> w = ConfidenceWindow(2)
    >>> w.add([3.0]), w.lowest
    (None, 3.0)
    >>> w.add([1.0, 1.0, 3.0]), w.lowest
    (1.0, 1.0)
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("window must be >= 1")
        self.size = size
        self.window: deque[float] = deque()
        self.total = 0.0  # of the values in the window
        self.count = 0  # tokens seen
        self.sum_all = 0.0  # of every token seen, for a trace shorter than one window
        self.lowest_full: float | None = None

    def push(self, value: float) -> float | None:
        """Add one token's confidence; the window's mean once it is full, else None."""
        self.window.append(value)
        self.total += value
        self.count += 1
        self.sum_all += value
        if len(self.window) > self.size:
            self.total -= self.window.popleft()
        if len(self.window) < self.size:
            return None
        mean = self.total / self.size
        self.lowest_full = mean if self.lowest_full is None else min(self.lowest_full, mean)
        return mean

    def add(self, values: Sequence[float]) -> float | None:
        """Add several tokens; the lowest full-window mean so far (what the online filter compares)."""
        for value in values:
            self.push(value)
        return self.lowest_full

    @property
    def lowest(self) -> float | None:
        if self.lowest_full is not None:
            return self.lowest_full
        return self.sum_all / self.count if self.count else None


def group_confidences(token_conf: Sequence[float], window: int) -> list[float]:
    """Sliding means over ``window`` consecutive tokens; one mean over all when there are fewer tokens.

    >>> group_confidences([1.0, 2.0, 3.0, 6.0], 2)
    [1.5, 2.5, 4.5]
    >>> group_confidences([1.0, 2.0], 5), group_confidences([], 5)
    ([1.5], [])
    """
    sliding = ConfidenceWindow(window)
    means = [m for m in map(sliding.push, token_conf) if m is not None]
    return means if means else ([sliding.lowest] if sliding.count else [])  # type: ignore[list-item]


def lowest_group_confidence(token_conf: Sequence[float], window: int) -> float | None:
    """The lowest sliding-window confidence of a trace; None for an empty trace.

    >>> lowest_group_confidence([3.0, 1.0, 1.0, 3.0], 2), lowest_group_confidence([], 2)
    (1.0, None)
    """
    sliding = ConfidenceWindow(window)
    sliding.add(token_conf)
    return sliding.lowest


def confidence_threshold(warmup_lowest: Sequence[float], percentile: float) -> float:
    """The threshold below which a trace is stopped: ``percentile`` of the warm-up traces' lowest group
    confidences (DeepConf online: 10 keeps ~90 % of traces, 90 keeps ~10 %).

    >>> confidence_threshold([1.0, 2.0, 3.0, 4.0, 5.0], 50)
    3.0
    """
    if not warmup_lowest:
        raise ValueError("confidence_threshold needs at least one warm-up trace")
    if not 0 <= percentile <= 100:
        raise ValueError("percentile must be in [0, 100]")
    return float(np.percentile(warmup_lowest, percentile))
