"""``solver compile-cache build|pack|check``: the engine's compile cache, built once and shipped (a Kaggle dataset).

    solver compile-cache build --preset h100-gptoss --model /models/gpt-oss-120b --out dist/compile-cache
    solver compile-cache pack ~/.cache/vllm --preset h100-gptoss --model M --out dist/compile-cache
    solver compile-cache check dist/compile-cache --preset h100-gptoss --model M

``build`` starts the config's engine with an empty cache root at a fixed path (vLLM's artefacts keep absolute
paths into it, and a start puts the copy back there), runs its warm-up if the config has one (every step shape
outside the CUDA graphs: Triton's MoE kernels), closes it and packs the root with a manifest of the vLLM, torch,
transformers, model, weights, GPU and ``VLLM_*`` variables it was built for.
``pack`` does the last step for a root an earlier run filled. ``check`` says, in one line, whether this machine
would use the cache (exit 0) or refuse it (exit 1). See solver/engines/compile_cache/.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import shutil
import uuid
from pathlib import Path

from solver.commands.common import EXIT_FAILED, add_base_config_arguments, config_from_args, fail


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "compile-cache", help="build, pack or check the engine's compile cache (ship it with a Kaggle submission)",
        description="The engine's compile cache as a folder to ship: built by a warmed-up engine, checked "
                    "against the vLLM, torch, model and GPU it was built for.")
    verbs = parser.add_subparsers(dest="verb", required=True)
    build = verbs.add_parser("build", help="start the engine on an empty cache (its warm-up if the config has one), close it, pack it")
    pack = verbs.add_parser("pack", help="pack an existing VLLM_CACHE_ROOT with a manifest for this machine")
    pack.add_argument("root", type=Path, help="the VLLM_CACHE_ROOT an engine filled")
    check = verbs.add_parser("check", help="would this machine use the cache? (exit 0 yes, 1 no)")
    check.add_argument("cache", type=Path, help="a folder made by build or pack")
    for verb in (build, pack):
        verb.add_argument("--out", type=Path, required=True, help="the folder to write (new or empty)")
    for verb in (build, pack, check):
        add_base_config_arguments(verb, engines=False)
        verb.add_argument("--dry-run", action="store_true", help="parse and check the command as written (the "
                          "config, the model, the folders); start nothing (solver/dryrun/plan.py)")
        verb.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from solver.engines.compile_cache import (ROOT_BASE, CacheError, build_root, check_cache, fingerprint_here,
                                              model_identity, model_link, pack, place_model, read_manifest,
                                              vllm_location, weights_identity)
    from solver.models import resolve_model

    config = config_from_args(args)
    if config.engine.name != "vllm":
        return fail(f"compile-cache needs the vllm engine, not {config.engine.name!r}")
    out = getattr(args, "out", None)
    if out is not None and out.exists() and (not out.is_dir() or any(out.iterdir())):
        return fail(f"{out} exists and is not empty; write the cache to a new folder")
    if args.dry_run:
        return dry_run(args, config)
    model = resolve_model(config.engine.model)
    # the environment the engine starts in (the preset's variables under this process's, as the engine applies them):
    # its VLLM_* variables are in vLLM's compile hash
    environ = {**{k: str(v) for k, v in config.engine.env.items()}, **os.environ}
    if args.verb == "check":
        read_manifest(args.cache)  # not a cache at all: a bad argument (exit 2), before reading its files
        verdict, _ = check_cache(args.cache, fingerprint_here(model, config.engine.args, environ))
        print(verdict.line)
        return 0 if verdict.usable else EXIT_FAILED
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    here = fingerprint_here(model, config.engine.args, environ)
    if args.verb == "pack":
        # the root's artefacts keep its absolute path: only a root at the fixed place can be used again
        root = args.root.absolute()
        if root.name != "vllm" or root.parent.parent != ROOT_BASE:
            raise CacheError(f"{args.root}: vLLM's artefacts keep their root's absolute path, so a shipped cache is "
                             f"built at {ROOT_BASE}/<id>/vllm and used there again: fill a root there "
                             "(VLLM_CACHE_ROOT) and pack it, or use `build`")
        # the root's engine was given the model as --model gives it: vLLM keyed its compiled graphs by that path
        manifest = pack(root, out, here, now, model_path=str(Path(model).absolute()) if Path(model).is_dir()
                        else model, model_name=Path(model).name, vllm_path=vllm_location())
    else:
        # the engine loads the model through a link named by its config and weights, made again where it is used
        through = (place_model(model, model_link(model_identity(model), weights_identity(model)))
                   if Path(model).is_dir() else model)
        # a fixed root of its own: vLLM's artefacts keep absolute paths into it, and a user's start copies it back
        root = build_root(uuid.uuid4().hex[:12])
        os.environ["VLLM_CACHE_ROOT"] = str(root / "vllm")
        # Triton's kernels inside the root too (as the H200's measured build had them), where pack merges them
        os.environ["TRITON_CACHE_DIR"] = str(root / "vllm" / "triton_cache")
        try:
            shapes = asyncio.run(_warm_engine(config, through))
            manifest = pack(root / "vllm", out, here, now, model_path=through, warmup_shapes=shapes,
                            model_name=Path(model).name, vllm_path=vllm_location())
        finally:
            shutil.rmtree(root, ignore_errors=True)  # packed (copied) into --out, or nothing to keep
    print(f"compile cache written to {out}: {manifest.files} files, {manifest.bytes / 2**20:.1f} MiB, built for "
          f"vLLM {manifest.fingerprint.vllm}, {manifest.model_name} ({manifest.fingerprint.model}, loaded through "
          f"{manifest.model_path}), {manifest.fingerprint.device}; used again at {manifest.cache_root}")
    return 0


async def _warm_engine(config: object, model: str) -> int:
    """Start the config's engine on ``model`` (the path vLLM keys its compiled graphs by), with its warm-up if the
    config has one, close it; the step shapes warmed (0 without a warm-up)."""
    import dataclasses

    from solver.engines.vllm_async import open_vllm_engine

    # the config's own warm-up: with Triton's MoE it compiles every step shape into the cache; Marlin needs none
    engine_config = dataclasses.replace(config.engine, model=model,  # type: ignore[attr-defined]
                                        compile_cache=None)
    engine = await open_vllm_engine(dataclasses.replace(config, engine=engine_config))  # type: ignore[type-var]
    try:
        return len(engine.warmup.shapes) if engine.warmup else 0
    finally:
        await engine.close()


def dry_run(args: argparse.Namespace, config: object) -> int:
    """``--dry-run``: the config and its model checked, the folders read where they are here; nothing started."""
    from solver.dryrun import DryRun
    from solver.config import ConfigError
    from solver.engines.compile_cache import ROOT_BASE, read_manifest

    dry = DryRun(f"solver compile-cache {args.verb}")
    dry.engine(config, ConfigError)
    if args.verb == "check" and dry.present(args.cache, "the cache", ConfigError):
        manifest = read_manifest(args.cache)
        dry.add(f"the cache: built for vLLM {manifest.fingerprint.vllm}, {manifest.model_name} "
                f"({manifest.fingerprint.model}), {manifest.fingerprint.device} (checked against this machine, and "
                "its files against its manifest, when run)")
    if args.verb == "pack" and dry.present(args.root, "the root", ConfigError):
        dry.add(f"pack {args.root} into {args.out}")
    if args.verb == "build":
        dry.add(f"start the engine on an empty cache root at {ROOT_BASE}/<id>/vllm"
                + (", warm it up" if config.engine.warmup else "") + f", close it, pack into {args.out}")
    return dry.print()
