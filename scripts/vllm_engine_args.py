"""Write the engine-argument names of a vLLM wheel (the fields of ``EngineArgs`` and ``AsyncEngineArgs`` in its
``vllm/engine/arg_utils.py``, read with ``ast``: nothing is installed or imported) as the data the dry runs check
``engine.args`` against (``solver/engines/engine_args.py``):

    pip download vllm==0.26.0 --no-deps -d /tmp/vllm026
    python scripts/vllm_engine_args.py /tmp/vllm026/vllm-0.26.0-*.whl > solver/engines/data/vllm-0.26.0-engine-args.txt

With ``--rules FILE`` it also writes what the engine accepts beyond the names
(``solver.engines.engine_args.known_from``: each argument's closed set or bounds, the server's flags, ``SamplingParams``' names) as JSON, the
``vllm-0.26.0-engine-rules.json`` beside it.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the solver package, run from a checkout

from solver.engines.engine_args import (  # noqa: E402 - after the path set-up above
    CLASSES, dataclass_fields, known_from, rules_json, wanted)

SOURCE = "vllm/engine/arg_utils.py"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path, help="a vLLM wheel (pip download vllm==VERSION --no-deps)")
    parser.add_argument("--rules", type=Path, default=None, metavar="FILE",
                        help="also write the arguments' closed sets and bounds, the server's flags and the sampling "
                             "parameters' names here (JSON)")
    args = parser.parse_args(argv)
    found = re.match(r"vllm-([^-]+)-", args.wheel.name)
    if not args.wheel.is_file() or found is None:
        parser.error(f"{args.wheel}: not a vLLM wheel file (vllm-VERSION-...whl)")
    try:
        with zipfile.ZipFile(args.wheel) as wheel:
            source = wheel.read(SOURCE).decode()
            files = {name: wheel.read(name).decode() for name in wheel.namelist() if wanted(name)}
    except (zipfile.BadZipFile, KeyError) as exc:
        parser.error(f"{args.wheel}: {exc}")
    names = dataclass_fields(source)
    if not names:
        parser.error(f"{args.wheel}: no fields of {' or '.join(CLASSES)} in {SOURCE}")
    digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
    print(f"# vLLM {found.group(1)}'s engine arguments: the fields of {' and '.join(CLASSES)} in {SOURCE} of\n"
          f"# {args.wheel.name} (PyPI; sha256 {digest}),\n"
          f"# the GPU machines' vLLM. Written by, from the repository's root:\n"
          f"#   pip download vllm=={found.group(1)} --no-deps -d /tmp/vllm026\n"
          f"#   python scripts/vllm_engine_args.py /tmp/vllm026/{args.wheel.name} --rules "
          f"solver/engines/data/vllm-{found.group(1)}-engine-rules.json "
          f"> solver/engines/data/vllm-{found.group(1)}-engine-args.txt\n"
          f"# {len(names)} names, one a line.")
    print("\n".join(names))
    if args.rules is not None:
        known = known_from(found.group(1), files)
        args.rules.write_text(rules_json(known, f"vLLM {found.group(1)} ({args.wheel.name}, sha256 {digest}): what "
                                                f"its engine arguments accept, its server's flags, its sampling "
                                                f"parameters; written by scripts/vllm_engine_args.py --rules"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
