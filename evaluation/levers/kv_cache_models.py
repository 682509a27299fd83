"""How much KV cache Marlin leaves on an H100: not measured, so two stand-ins beside ``h100-gptoss-marlin`` (which keeps
Triton's 578,912 tokens, ``h100_probes.json``). On the H200 the Marlin engine reported 3,337,602 tokens against
Triton's 3,595,283 with the same settings (benchmarks/README.md, "The time model of the chosen backend"): Marlin's
weights and workspace take the difference. If that share carries to the H100, its pool is 7.2 % smaller; if the bytes
carry (the weights are the same size on either GPU, and the cache gets what is left), 257,681 tokens fewer. Run from the
repository root: ``python evaluation/levers/kv_cache_models.py`` writes
``h100-gptoss-marlin-kv-share.yaml`` and ``h100-gptoss-marlin-kv-bytes.yaml`` beside it."""

from dataclasses import replace
from pathlib import Path

from solver.timing.model import dump, load_time_model

HERE = Path(__file__).resolve().parents[1] / "results" / "levers-speed"  # where its results go
TRITON, MARLIN = 3_595_283, 3_337_602   # the H200's engines' KV cache, tokens (h200-gptoss, h200-gptoss-marlin)

m = load_time_model("h100-gptoss-marlin")
share = round(m.cache_tokens * MARLIN / TRITON)
less = m.cache_tokens - (TRITON - MARLIN)
for tag, tokens, why in (
        ("kv-share", share, f"h100-gptoss's {m.cache_tokens:,} times {MARLIN:,} / {TRITON:,}, the H200's Marlin over "
                            "Triton KV cache (the share carried); inferred, not measured on an H100"),
        ("kv-bytes", less, f"h100-gptoss's {m.cache_tokens:,} less {TRITON - MARLIN:,}, the H200's Triton less Marlin "
                           "KV cache (the bytes carried); inferred, not measured on an H100")):
    v = replace(m, name=f"h100-gptoss-marlin-{tag}", cache_tokens=tokens,
                description=f"h100-gptoss-marlin with a KV cache of {tokens:,} tokens (a stand-in: Marlin's cache on an "
                            "H100 is not measured)",
                sources={**m.sources, "cache_tokens": why},
                fitted_on=tuple(replace(f, numbers=tuple(n for n in f.numbers if n != "cache_tokens"))
                                for f in m.fitted_on))
    (HERE / f"h100-gptoss-marlin-{tag}.yaml").write_text(dump(v))
    print(f"{v.name}: cache_tokens {tokens:,}")
