"""``python -m solver.models``: build the models set-up prepares (the embedded tiny model and the tiny harmony
model) where they are not cached yet, and print where they are; exit 1 with a one-line error when one cannot be
built."""

from __future__ import annotations

import sys

from solver.models import ModelError, ensure_tiny_harmony_model, ensure_tiny_model


def main() -> int:
    try:
        for build in (ensure_tiny_model, ensure_tiny_harmony_model):
            print(build())
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
