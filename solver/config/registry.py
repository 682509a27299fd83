"""Name -> factory tables, so engines, sandboxes, voters and stoppers are chosen by name in the config."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

from solver.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """A table of factories under names.

    >>> r: Registry[int] = Registry("number")
    >>> @r.register("one")
    ... def _one() -> int:
    ...     return 1
    >>> r.create("one")
    1
    >>> r.create("two")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: unknown number 'two' (choose from one)
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._factories: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def add(factory: Callable[..., T]) -> Callable[..., T]:
            self._factories[name] = factory
            return factory

        return add

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> Callable[..., T]:
        if name not in self._factories:
            raise ConfigError(f"unknown {self.kind} {name!r} (choose from {', '.join(self.names())})")
        return self._factories[name]

    def create(self, name: str, *args: object, **kwargs: object) -> T:
        return self.get(name)(*args, **kwargs)
