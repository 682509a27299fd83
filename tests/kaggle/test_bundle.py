"""The offline bundle: kaggle/build_bundle.py makes a folder from which pip installs the project with no index,
into a fresh virtual environment, and checks a bundle for what the notebook needs. Dependencies are not bundled
here (that needs the network and gigabytes): the fresh venv installs with --no-deps, the test checks every
module and data file arrived, and the check of that project-only bundle names what a real one must add."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import venv
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "kaggle" / "build_bundle.py"


def _offline_env() -> dict[str, str]:
    """The environment without pip's configured indexes and wheel folders: only the bundle can serve."""
    # PYTHONPATH would import the source tree instead of what was installed.
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env["PIP_CONFIG_FILE"] = os.devnull
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "solver-bundle"
    done = subprocess.run([sys.executable, str(SCRIPT), str(out), "--only-project"], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def test_bundle_holds_the_project_wheel_and_a_manifest(bundle: Path) -> None:
    manifest = json.loads((bundle / "bundle.json").read_text())
    wheels = sorted(p.name for p in bundle.glob("*.whl"))
    assert wheels == manifest["wheels"] == [manifest["project_wheel"]]
    assert wheels[0].startswith("solver-") and wheels[0].endswith("-py3-none-any.whl")
    assert "--no-index" in manifest["install"] and str(bundle) in manifest["install"]
    assert not list(bundle.glob("tmp*")), "the scratch folder must be gone"


def test_fresh_venv_installs_the_project_from_the_bundle_offline(bundle: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index", "--find-links",
               str(bundle), "--no-deps", "--quiet", "solver"]
    done = subprocess.run(install, capture_output=True, text=True, env=_offline_env(), timeout=300)
    assert done.returncode == 0, done.stderr
    probe = ("import json, pathlib, solver; root = pathlib.Path(solver.__file__).parent; "
             "print(json.dumps({'version': solver.__version__, 'root': str(root), "
             "'files': sorted(str(p.relative_to(root)) for p in root.rglob('*') if p.is_file() "
             "and '__pycache__' not in p.parts)}))")
    shown = subprocess.run([str(python), "-c", probe], capture_output=True, text=True, timeout=60, cwd=tmp_path,
                           env=_offline_env())
    assert shown.returncode == 0, shown.stderr
    installed = json.loads(shown.stdout)
    assert installed["root"].startswith(str(env_dir)), "imported from the fresh venv, not the source tree"
    source = {str(p.relative_to(ROOT / "solver")) for p in (ROOT / "solver").rglob("*.py")
              if "__pycache__" not in p.parts}
    assert source <= set(installed["files"])
    assert {"presets/h100.yaml", "presets/tiny.yaml", "prompts/tir.yaml"} <= set(installed["files"])
    assert (env_dir / "bin" / "solver").is_file(), "the console script is installed"


def test_bundle_refuses_a_non_empty_output_folder(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("x")
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--only-project"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    assert "not an empty folder" in done.stderr and len(done.stderr.strip().splitlines()) <= 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]


def test_notebook_is_a_thin_valid_shell() -> None:
    import nbformat

    notebook = nbformat.read(ROOT / "kaggle" / "submission.ipynb", as_version=4)
    nbformat.validate(notebook)
    code = [c.source for c in notebook.cells if c.cell_type == "code"]
    joined = "\n".join(code)
    assert "--no-index" in joined and "--find-links" in joined and '"solver[gpu,kaggle]"' in joined
    assert "KagglePredictor(" in joined and "serve(" in joined
    # A thin shell: no function or class definitions, no loops or branches; the logic lives in the package.
    logic = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.Try)
    for source in code:
        assert not [n for n in ast.walk(ast.parse(source)) if isinstance(n, logic)], source
    assert all(not c.get("outputs") for c in notebook.cells if c.cell_type == "code")


def test_platform_tags_cover_older_manylinux_wheels() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_bundle", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    tags = module.expand_platforms(["manylinux_2_35_x86_64", "manylinux_2_28_x86_64"])
    assert tags[0] == "manylinux_2_35_x86_64" and len(tags) == len(set(tags))
    # matplotlib, scipy and others ship manylinux2014-only wheels: those must be acceptable on Kaggle's image.
    assert {"manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64"} <= set(tags)
    assert "manylinux_2_36_x86_64" not in tags


def _module() -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_bundle", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebook_needs_what_import_solver_kaggle_loads_and_the_gateways_relay() -> None:
    required = _module().required_distributions(ROOT)
    assert {"polars", "pyarrow", "grpcio", "protobuf", "pyyaml"} <= set(required)
    assert "vllm" not in required, "the engine is the gpu/cpu extra's, pinned separately"


def test_check_of_a_project_only_bundle_names_the_missing_distributions(bundle: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--check", str(bundle)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 1
    (line,) = [x for x in done.stderr.splitlines() if "check failed" in x]
    assert "no wheel for" in line and "polars" in line and "pyarrow" in line
    manifest = json.loads((bundle / "bundle.json").read_text())
    assert manifest["checked"] is False and manifest["problems"]
    assert manifest["total_bytes"] == sum(manifest["sizes_bytes"].values()) > 0


def test_a_vllm_pin_outside_the_supported_range_is_refused(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "b"), "--vllm", "0.11.2"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "vLLM 0.11.2 is outside the supported range" in done.stderr
    assert not (tmp_path / "b").exists()
