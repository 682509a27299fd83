"""Write an extract of recorded attempts (N problems x K attempts) for a machine that does not get ../shared.

The real attempts may be used but not redistributed, so the extract never goes where it could be committed: a
path outside this repository, or one git ignores (the GPU kit's ``.gpu/`` folder, which a ``device`` call can
carry); any other path inside the repository is refused. On the GPU machine, point the benchmark at it with
``--attempts-file``. The attempts chosen are the ones ``engine.py --workload real`` replays with the same
``--problems`` and ``--attempts`` (``attempts.choose``: the first N problems with at least K attempts, their first
K), each line copied unchanged; the suffix picks the compression (``.xz``, ``.gz``, ``.bz2`` or plain).

    python benchmarks/extract_attempts.py /tmp/attempts-2x8.jsonl.xz --problems 2 --attempts 8
    python benchmarks/extract_attempts.py .gpu/6-attempts/attempts.jsonl.xz --problems 2   # a carry of its own
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import json
import lzma
import subprocess
import sys
from pathlib import Path

from attempts import PlanError, choose

from solver.files import atomic_write
from solver.recordings import TraceError, json_lines, read_attempts

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SOURCE = ROOT.parent / "shared" / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
_COMPRESSORS = {".xz": lzma.compress, ".gz": gzip.compress, ".bz2": bz2.compress}


def inside(path: Path, folder: Path) -> bool:
    """
    >>> inside(Path("/r/a/b.xz"), Path("/r")), inside(Path("/tmp/b.xz"), Path("/r"))
    (True, False)
    """
    return path == folder or folder in path.parents


def ignored(path: Path) -> bool:
    """Whether git ignores ``path`` in this repository (so it can never be committed by accident)."""
    try:
        done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", "--", str(path)], capture_output=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="the extract to write, outside this repository")
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE, help="the recorded attempts (default: the "
                        "dev file in ../shared)")
    parser.add_argument("--problems", type=int, default=1)
    parser.add_argument("--attempts", type=int, default=8, help="per problem")
    parser.add_argument("--problem-ids", default="", help="these problems, comma-separated (instead of the first "
                        "--problems)")
    args = parser.parse_args(argv)
    out = args.out.expanduser().resolve()
    try:
        if inside(out, ROOT) and not ignored(out):
            raise PlanError(f"{args.out} is inside the repository and not ignored by git: the recorded attempts may "
                            "not be redistributed, write the extract elsewhere (e.g. /tmp or .gpu/)")
        if args.problems < 1 or args.attempts < 1:
            raise PlanError("--problems and --attempts must be >= 1")
        attempts = read_attempts(args.source)  # validates every line as a replayable trace
        only = [p.strip() for p in args.problem_ids.split(",") if p.strip()]
        chosen = choose([a.problem_id for a in attempts], len(only) or args.problems, args.attempts, only)
    except (TraceError, PlanError) as exc:
        print(f"extract_attempts.py: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return 2
    out.parent.mkdir(parents=True, exist_ok=True)
    records = [record for _, record in json_lines(args.source)]
    lines = [json.dumps(records[p]) + "\n" for positions in chosen.values() for p in positions]
    data = "".join(lines).encode("utf-8")
    atomic_write(out, _COMPRESSORS.get(out.suffix, bytes)(data))  # never half-written
    print(f"{out}: {len(lines)} attempts of {len(chosen)} problems ({', '.join(chosen)}), "
          f"{out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
