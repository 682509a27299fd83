"""The sandbox's template process gets a fresh environment, but the solver's import path: code run there sees the
libraries the solver was installed with, also when they live in a folder on PYTHONPATH (an offline machine's
unpacked wheels, as on the GPU machine's kit)."""

from __future__ import annotations

import asyncio

from solver.config import SandboxConfig
from solver.sandbox.channel import template_env
from solver.sandbox.pool import ProcessPoolSandbox


def test_the_template_keeps_only_the_import_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("SECRET_TOKEN", "x")
    env = template_env("/tmp/base")
    assert env["PYTHONPATH"] == str(tmp_path) and "SECRET_TOKEN" not in env
    monkeypatch.delenv("PYTHONPATH")
    assert "PYTHONPATH" not in template_env("/tmp/base")


def test_code_imports_a_library_found_on_the_solvers_pythonpath(monkeypatch, tmp_path):
    (tmp_path / "offline_lib.py").write_text("VALUE = 41 + 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))

    async def run() -> tuple[str, str]:
        sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=20.0))
        await sandbox.start()
        try:
            execution = await sandbox.run("import offline_lib\nprint(offline_lib.VALUE)")
        finally:
            await sandbox.close()
        return execution.status, execution.stdout

    assert asyncio.run(run()) == ("ok", "42\n")
