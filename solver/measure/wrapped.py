"""An engine around another (``inner``): its name, tokenizer, load, death and close are the inner engine's. The
measuring engines (``timeline.TimedEngine``, ``traced.TracedEngine``) derive from it and change only how a request
streams."""

from __future__ import annotations

from typing import Any


class WrappedEngine:
    """Hands everything but ``stream`` on to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name, self.tokenizer = inner.name, inner.tokenizer

    def running_requests(self) -> int:
        return self.inner.running_requests()

    def is_dead(self) -> bool:
        """The inner engine's death flag (the Kaggle supervisor checks it before each problem); False for an engine
        that has none."""
        dead = getattr(self.inner, "is_dead", None)
        return bool(dead()) if callable(dead) else False

    async def close(self) -> None:
        await self.inner.close()
