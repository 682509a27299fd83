"""The child side of the sandbox: a warm template process that forks one isolated process per snippet.

``solver.sandbox.pool`` starts this package as a fresh interpreter (never a fork of the solver, which may hold CUDA or
engine state). It imports the preamble once, warms sympy's lazy imports, then serves its parent over a
``SOCK_SEQPACKET`` socket. It uses the standard library only and never imports the ``solver`` package.

Process tree when the kernel allows namespaces::

    solver ── supervisor ── template (init of the pool's pid namespace)
                                ├── snippet (init of its own pid, mount namespaces) ── whatever it forks
                                └── spare snippets, forked ahead and waiting for code

Each snippet process is forked *before* its code arrives (a "spare"), so the fork and the isolation set-up
are off the latency path. A spare that receives a request gets its stdout, stderr and report pipes and the code
(a memfd) straight from the parent through the template; the parent reads the pipes itself.

Protocol (JSON, one message per datagram):
  parent -> template: {"op": "run", "id", "timeout_s", "repl"} + fds [code, stdout, stderr, report]
                      {"op": "kill", "id"}    {"op": "close"}
  template -> parent: {"op": "ready", "isolation": {...}}   {"op": "fatal", "error"}
                      {"op": "exit", "id", "status", "cpu_s", "timed_out", "error"}
  snippet -> parent (report pipe): b"ok\\n" | b"error\\n" | b"memory\\n"

Modules: ``syscalls`` (ctypes wrappers and Linux constants), ``layers`` (settings, the isolation layers and
``isolate``), ``snippet`` (running code in a forked process), ``template`` (the supervisor: spares, jobs,
deadlines, reaping), ``bootstrap`` (namespaces, the probe, the warm-up, ``main``). They import the standard
library and each other only (relative imports), so the package runs under any name.
"""
