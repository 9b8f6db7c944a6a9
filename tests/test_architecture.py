"""The layering rules of docs/architecture.md, checked on the source (issue 17).

* No import cycles between the package's modules (lazy imports inside
  functions count: a cycle hidden in a function is still a cycle).
* No module reaches into another module's estimator through a private
  method: the search, the report and the tracer use the public planning
  contract (``privacy_plan`` / ``privacy_plan_``).
* ``_outofcore`` is the only module that asks whether ``X`` is an
  out-of-core row source.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sklearn_fdp"


def _modules():
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_package)
    return out


MODULES = _modules()


def _resolve(module, is_package, node):
    """Module names an import node of ``module`` refers to (within the package)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.split(".")[0] == "sklearn_fdp"]
    base = module.split(".") if is_package else module.split(".")[:-1]
    if node.level:
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    if target.split(".")[0] != "sklearn_fdp":
        return []
    # `from pkg import name`: the submodule pkg.name if there is one, else pkg.
    found = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        found.append(sub if sub in MODULES else target)
    return found


def import_graph():
    graph = {}
    for module, (path, is_package) in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                edges.update(t for t in _resolve(module, is_package, node)
                             if t in MODULES and t != module)
        graph[module] = edges
    return graph


def _cycles(graph):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def _is_package_edge(a, b):
    """A package importing its own submodule (its __init__ re-exports) or a
    submodule importing a name its package's __init__ re-exports."""
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_no_import_cycles():
    graph = import_graph()
    # A package's __init__ gathers its submodules; edges between a package and
    # its own submodules are that re-export, not a dependency cycle.
    graph = {a: {b for b in bs if not _is_package_edge(a, b)} for a, bs in graph.items()}
    cycles = _cycles(graph)
    assert cycles == [], cycles


def _private_methods_by_module():
    """``{method name: {defining modules}}`` of the private methods of the
    package's classes (dunders aside)."""
    seen = {}
    for module, (path, _) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                            and item.name.startswith("_") and not item.name.startswith("__")):
                        seen.setdefault(item.name, set()).add(module)
    return seen


def test_no_module_calls_another_modules_private_methods():
    owners = _private_methods_by_module()
    reach_ins = []
    for module, (path, _) in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Attribute) and node.attr in owners
                    and module not in owners[node.attr]
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and not (isinstance(node.value, ast.Call)
                             and getattr(node.value.func, "id", None) == "super")):
                reach_ins.append(f"{module}:{node.lineno} .{node.attr} "
                                 f"(defined in {sorted(owners[node.attr])})")
    assert reach_ins == [], reach_ins


@pytest.mark.parametrize("name", ["is_row_source", "isinstance(X, RowSource"])
def test_only_outofcore_asks_what_kind_of_array_x_is(name):
    users = [module for module, (path, _) in MODULES.items()
             if module != "sklearn_fdp._outofcore" and name in path.read_text()]
    assert users == [], users


# Layers from the top: a module may import from its own layer and the ones below.
_LAYERS = [
    ("consumers", ("sklearn_fdp._search", "sklearn_fdp._report", "sklearn_fdp.pipeline",
                   "sklearn_fdp.cli", "sklearn_fdp.model_selection")),
    ("estimators", ("sklearn_fdp.linear", "sklearn_fdp.neural", "sklearn_fdp.preprocessing")),
    ("mechanisms", ("sklearn_fdp._mechanisms",)),
    ("engine", ("sklearn_fdp._engine",)),
    ("kernels", ("sklearn_fdp._kernels",)),
]


def _layer(module):
    for depth, (_, prefixes) in enumerate(_LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return depth
    return None  # shared modules, audit, datasets, plotting: not layered here


def test_layers_import_only_downwards():
    upward = []
    for module, targets in import_graph().items():
        mine = _layer(module)
        if mine is None:
            continue
        for target in targets:
            theirs = _layer(target)
            if theirs is not None and theirs < mine:
                upward.append(f"{module} ({_LAYERS[mine][0]}) imports {target} "
                              f"({_LAYERS[theirs][0]})")
    assert upward == [], upward


# -- docs/architecture.md's picture is the tree ---------------------------------------------

ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def _tree_block():
    """The ``sklearn_fdp/`` code block of docs/architecture.md: ``{folder: {module names}}``
    ("" for the top level; ``#`` starts a remark)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    block = text.split("```\nsklearn_fdp/\n", 1)[1].split("```", 1)[0]
    tree, folder = {}, ""
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        if not line.startswith("   "):  # a new entry: a folder, or top-level modules
            folder = ""
        if all(word.endswith("/") for word in words):  # folders named as such (audit/)
            tree.setdefault("", set()).update(word.rstrip("/") for word in words)
            continue
        for word in words:
            if word.endswith("/") and word[:-1].isidentifier() and word is words[0]:
                folder = word[:-1]
                tree.setdefault(folder, set())
                continue
            tree.setdefault(folder, set()).add(word.removesuffix(".py").rstrip("/"))
    return tree


def test_architecture_tree_names_every_module_and_only_those():
    """Every module of the package is in the page's tree, and everything in the tree is a
    module (or, for ``audit/`` and ``datasets/``, a folder) of the package."""
    tree = _tree_block()
    on_disk = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] in ("audit", "datasets"):
            continue
        if len(rel.parts) <= 2:
            on_disk.setdefault(rel.parts[0] if len(rel.parts) == 2 else "", set()).add(path.stem)
    on_disk[""] |= {"audit", "datasets"}
    assert {f: sorted(m) for f, m in tree.items()} == {f: sorted(m) for f, m in on_disk.items()}


_SPAN = __import__("re").compile(r"`([\w/.]+(?:\.py|/))`")


def test_every_module_the_architecture_page_names_exists():
    missing = []
    for span in _SPAN.findall(ARCHITECTURE.read_text(encoding="utf-8")):
        root = PACKAGE.parent if span.split("/")[0] in ("tests", "docs", "benchmarks") else PACKAGE
        if not (root / span.rstrip("/")).exists():
            missing.append(span)
    assert missing == [], missing


def test_accounting_package_keeps_its_api():
    """Issue 33 split accounting.py into a package: every name importers used still resolves
    on ``sklearn_fdp.accounting`` (the public ones and the private ones other modules use)."""
    from sklearn_fdp import accounting

    public = {"ACCOUNTANTS", "NEIGHBORING_RELATIONS", "DpEvent", "dpsgd_event", "gaussian_event",
              "compose_events", "epsilon_of_event", "epsilon_and_accountant", "compute_epsilon",
              "calibrate_noise_multiplier", "calibration_cache_path", "clear_calibration_cache",
              "gaussian_noise_multiplier", "gaussian_epsilon", "gdp_epsilon", "gaussian_release",
              "gaussian_sigma_and_epsilon", "TRIAL_DISTRIBUTIONS", "repeat_and_select_event",
              "truncated_negative_binomial_gamma", "calibrate_repeat_and_select"}
    assert set(accounting.__all__) == public
    for name in (*public, *accounting._PRIVATE_API):
        assert getattr(accounting, name) is not None, name
