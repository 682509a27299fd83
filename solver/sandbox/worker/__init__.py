"""The child side of the sandbox: a warm template process that forks isolated processes for snippets and sessions.

``solver.sandbox.channel`` starts this package as a fresh interpreter (never a fork of the solver, which may
hold CUDA or engine state). It imports the preamble once, warms sympy's lazy imports, then serves its parent over a
``SOCK_SEQPACKET`` socket. It uses the standard library only and never imports the ``solver`` package.

Process tree when the kernel allows namespaces::

    solver ── supervisor ── template (init of the pool's pid namespace)
                                ├── snippet (init of its own pid, mount namespaces) ── whatever it forks
                                ├── session (the same isolation; serves one repetition's calls until ended)
                                └── spares, forked ahead and waiting for code

Each process is forked *before* its code arrives (a "spare"), so the fork and the isolation set-up are off the
latency path. A spare that receives a request gets its stdout, stderr and report pipes and the code (a memfd)
straight from the parent through the template; the parent reads the pipes itself. A request that names a
session turns the spare into that session: it keeps its namespace and serves the session's later calls, each
with pipes of its own, until the parent ends it or the template kills it.

Protocol (JSON, one message per datagram):
  parent -> template: {"op": "run", "id", "timeout_s", "repl"[, "session": sid]} + fds [code, stdout, stderr,
                      report]    {"op": "kill", "id"}    {"op": "end", "sid"}    {"op": "close"}
  template -> parent: {"op": "ready", "isolation": {...}}   {"op": "fatal", "error"}
                      {"op": "exit", "id", "status", "cpu_s", "timed_out", "error"}    {"op": "ended", "sid"}
  template -> spare:  {"id", "timeout_s", "repl"[, "session": true]} + the four fds
  session -> template: {"op": "done", "id", "cpu_s"}
  snippet -> parent (report pipe): b"ok\\n" | b"error\\n" | b"memory\\n"
  session -> parent (report pipe): b"ok 3\\n" (the call's number in its process) | b"error 4 interrupted\\n" | ...

Modules: ``syscalls`` (ctypes wrappers and Linux constants), ``layers`` (settings, the isolation layers and
``isolate``), ``snippet`` (running code with the REPL's rules; one snippet per process), ``session`` (a process
that runs a repetition's calls in one namespace), ``kernel`` (a session's cells through IPython's shell, shown as a
Jupyter kernel shows them: ``display: ipython``), ``spare`` (a forked process from isolation to its first
request), ``records`` and ``template`` (the supervisor: spares, jobs, sessions, deadlines, reaping), ``bootstrap``
(namespaces, the probe, the warm-up, IPython's shell and the starter cell's check, ``main``). They import the
standard library and each other only (relative imports), so the package runs under any name; ``kernel`` imports
IPython too, and is imported only when sessions display as a kernel.
"""
