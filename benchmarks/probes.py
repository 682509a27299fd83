"""Engine probes for the two costs the real shape showed on the H100 (benchmarks/README.md, "The real shape"), each printing its numbers.

  resent  S sequences of L-token prompts (random ids, distinct per sequence) are sent once, one token each, which
          fills the prefix cache, then re-sent, each decoding D tokens. Does the cache keep them? Printed per L:
          the re-sent prompts' share found in the cache (per request, and the engine's own hit counter), decode
          tokens/s, KV cache peak, preemptions, and how the wanted tokens compare with the cache's size.
  turns   S sequences x T turns of N tokens, A random ids appended after each turn (a tool message), every turn a
          new request on the grown context, against one request of T x N tokens per sequence: tokens/s both
          ways, their ratio, seconds per turn, the later turns' cached share.
  decode  pure decode, the prefill timed apart: per L, S distinct L-token prompts (``--decode-seqs``, largest
          first) each decode D tokens, streamed; tokens/s over the window in which all S decode (after the last
          one's first token, until the first one ends), and the prefill's seconds before it. On request only.

Straight on vLLM's ``AsyncLLM`` (no solver code between), the engine built from the preset and ``--set``
overrides, so candidate fixes (``gpu_memory_utilization``, ``max_num_batched_tokens``, ``block_size``,
``async_scheduling``, ``enable_chunked_prefill``, ``stream_interval``, ...) are one flag each.

    python benchmarks/probes.py --quick                          # CPU, the tiny model, small sizes
    python benchmarks/probes.py --gpu --model PATH --set engine.args.load_format=dummy --json probes.json
    python benchmarks/probes.py --gpu --model PATH --set engine.args.load_format=dummy --probes decode \
        --contexts 2048,16384,49152 --decode-seqs 1,8,64 --json decode.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

from solver.config import Config, ConfigError, add_gpu_arguments, gpu_config
from solver.measure.vllm_probes import cache_tokens, decode, generate, random_ids, resent, turns
from solver.errors import BadInput
from solver.files import atomic_write

PROBES = ("resent", "turns", "decode")
async def run(config: Config, args: argparse.Namespace) -> dict[str, Any]:
    from solver.engines import open_engine

    engine = await open_engine(config)
    llm = engine._llm
    try:
        await asyncio.gather(*(generate(llm, random_ids(64, ("warm", i)), 8, i) for i in range(4)))  # one-off costs
        size = cache_tokens(llm)
        print(f"engine: {config.engine.model or 'tiny'}, KV cache {size} tokens (blocks x block size, as the engine "
              f"reports them), {json.dumps(config.engine.args, sort_keys=True)}")
        out: dict[str, Any] = {"kv_cache_tokens": size, "engine_args": config.engine.args}
        if "resent" in args.keys:
            out["resent"] = []
            for length in args.contexts:
                r = await resent(llm, args.seqs, length, args.decode)
                out["resent"].append(r)
                hit = "-" if r["prefix_hit_rate"] is None else f"{100 * r['prefix_hit_rate']:.0f} %"
                print(f"resent {args.seqs} x {length}: fill {r['fill_s']:.2f} s ({r['prefill_tps']:.0f} tok/s "
                      f"prefill); re-sent: cached {100 * r['cached_share']:.0f} % (per sequence {r['cached_min']}.."
                      f"{r['cached_max']} of {length}), engine hit rate {hit}; {args.seqs} x {args.decode} tokens in "
                      f"{r['seconds']:.2f} s = {r['tps']:.0f} tok/s; KV peak {100 * r['kv_peak']:.0f} %, "
                      f"preemptions {r['preemptions']}; wanted {r['wanted_tokens']} tokens of {size}")
        if "turns" in args.keys:
            r = await turns(llm, args.seqs, args.turns, args.turn_tokens, args.appended, args.first_tokens)
            out["turns"] = r
            share = r["later_turns_cached_share"]
            print(f"turns {args.seqs} x {args.turns} x {args.turn_tokens} (+{args.appended} appended, first prompt "
                  f"{args.first_tokens}): a request per turn {r['turns_s']:.2f} s = {r['turns_tps']:.0f} tok/s, one "
                  f"request {r['one_request_s']:.2f} s = {r['one_request_tps']:.0f} tok/s; ratio {r['ratio']:.3f}; "
                  f"{r['turn_s_median']:.2f} s per turn (median); later turns cached "
                  f"{'-' if share is None else f'{100 * share:.0f} %'}; KV peak {100 * r['kv_peak']:.0f} %, "
                  f"preemptions {r['preemptions']}")
        if "decode" in args.keys:
            out["decode"] = []
            for length in args.contexts:
                rows = await decode(llm, args.decode_seqs, length, args.decode)
                out["decode"].append(rows)
                if args.json is not None:  # after each context: a device call cut off keeps what it measured
                    atomic_write(args.json, json.dumps({**out, "argv": args.argv}, indent=1))
                for r in rows:
                    rate = "window empty (decode more tokens)" if r["tps"] is None else (
                        f"{r['tps']:.0f} tok/s ({r['per_seq_tps']:.0f} per sequence)")
                    print(f"decode {r['seqs']} x {length}: prefill {r['prefill_s']:.2f} s (cached "
                          f"{100 * r['cached_share']:.0f} %), then {r['window_tokens']} tokens in "
                          f"{r['window_s']:.2f} s = {rate}")
        return out
    finally:
        await engine.close()


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probes", default="resent,turns", help="among resent, turns, decode (default the first two)")
    parser.add_argument("--seqs", type=int, default=8)
    parser.add_argument("--contexts", default="16384,32768,49152", help="resent: prompt lengths, comma-separated")
    parser.add_argument("--decode", type=int, default=256, help="resent, decode: tokens each prompt decodes")
    parser.add_argument("--decode-seqs", default="1,8,64", help="decode: sequences decoding at once, comma-separated")
    parser.add_argument("--turns", type=int, default=12)
    parser.add_argument("--turn-tokens", type=int, default=1000)
    parser.add_argument("--appended", type=int, default=120, help="turns: ids appended after each turn")
    parser.add_argument("--first-tokens", type=int, default=1024, help="turns: the first prompt's length")
    parser.add_argument("--quick", action="store_true",
                        help="CPU smoke sizes: 4 sequences, contexts 256 and 512, 16 decoded; 3 turns of 32 (+8)")
    add_gpu_arguments(parser, set_help="engine override, e.g. --set engine.args.gpu_memory_utilization=0.95")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--dry-run", action="store_true",
                        help="parse, plan and check (solver/dryrun/plan.py); start nothing")
    args = parser.parse_args(argv)
    args.argv = sys.argv[1:] if argv is None else argv
    if args.quick:
        args.seqs, args.contexts, args.decode = 4, "256,512", 16
        args.turns, args.turn_tokens, args.appended, args.first_tokens = 3, 32, 8, 128
    args.keys = [k.strip() for k in args.probes.split(",") if k.strip()]
    if not args.keys or not set(args.keys) <= set(PROBES):
        raise BadInput(f"--probes: choose among {', '.join(PROBES)}, not {args.probes!r}")
    try:
        args.contexts = ints(args.contexts)
    except ValueError:
        raise BadInput(f"--contexts: comma-separated token counts, not {args.contexts!r}") from None
    try:
        args.decode_seqs = ints(args.decode_seqs)
    except ValueError:
        raise BadInput(f"--decode-seqs: comma-separated sequence counts, not {args.decode_seqs!r}") from None
    if not args.decode_seqs or min([args.seqs, args.decode, args.turns, args.turn_tokens, args.first_tokens,
                                    *args.contexts, *args.decode_seqs]) < 1:
        raise BadInput("sizes must be >= 1")
    if args.appended < 0:
        raise BadInput("--appended must be >= 0")
    if args.json is not None and not args.json.parent.is_dir():
        raise BadInput(f"--json: no folder {args.json.parent}")
    try:
        args.config = gpu_config(args)
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    limit = args.config.engine.args.get("max_model_len")
    if limit is not None:
        longest = max([c + args.decode for c in args.contexts] if {"resent", "decode"} & set(args.keys) else [0])
        if "turns" in args.keys:
            longest = max(longest, args.first_tokens + args.turns * (args.turn_tokens + args.appended))
        if longest > limit:
            raise BadInput(f"the probes need contexts of {longest} tokens, engine.args.max_model_len is {limit}")
    return args


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse(argv)
        if args.dry_run:
            from solver.dryrun import DryRun

            dry = DryRun("probes.py")
            dry.engine(args.config, BadInput)
            dry.add(f"probes {', '.join(args.keys)}: {args.seqs} sequences, contexts {args.contexts}; engine args "
                    f"{json.dumps(args.config.engine.args, sort_keys=True)}")
            if "decode" in args.keys:
                dry.add(f"decode: {args.decode_seqs} sequences at each context, {args.decode} tokens each; the "
                        f"prompts' {max(args.decode_seqs) * sum(args.contexts)} tokens prefilled first, timed apart")
            return dry.print()
    except BadInput as exc:
        print(f"probes.py: error: {exc}", file=sys.stderr)
        return 2
    if not args.gpu:
        for key, value in args.config.engine.env.items():
            os.environ.setdefault(key, str(value))
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    out = asyncio.run(run(args.config, args))
    if args.json is not None:
        out["argv"] = args.argv
        atomic_write(args.json, json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
