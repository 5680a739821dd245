"""What imports what inside ``engine/``: no module reaches itself through its imports, the
subpackages form layers (analytic <- decoder <- measure <- training and serving, the command
line on top), and the vLLM code (``engine/serving``) takes its prompts from the prompt sets,
not from the benchmark.

Imports are read from the source with ``ast``, those inside functions too: an import moved
into a function still ties the two modules together, it only hides the cycle until run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the engine package by dotted name (a package by its own name)."""
    found = {}
    for path in sorted((root / "engine").rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def imports(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the engine modules it imports (``from pkg import name`` counts as ``pkg.name``
    when that is a module, else as ``pkg``)."""
    known = modules(root)

    def resolve(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from .x import y
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                names = [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            targets |= {t for n in names if n.startswith("engine") and (t := resolve(n))}
        graph[module] = targets - {module}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan): each is a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while (w := stack.pop()) != v:
                group.append(w)
            if group:
                found.append(sorted([v, *group]))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def subpackage(module: str) -> str:
    """``engine.measure.bench`` -> ``engine.measure``; top-level modules stay themselves."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (ROOT / "/".join(parts)).is_dir() else module


def subpackage_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    layers: dict[str, set[str]] = {}
    for module, targets in graph.items():
        layers.setdefault(subpackage(module), set()).update(
            subpackage(t) for t in targets if subpackage(t) != subpackage(module))
    return layers


def test_the_cycle_finder_finds_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_reader_sees_imports_of_every_form():
    graph = imports()
    assert "engine.analytic.theory" in graph["engine.analytic.acceptance"]  # from x import y
    assert "engine.measure.bench" in graph["engine.training.train_pair"]  # inside a function
    assert "engine.decoder.stats" in graph["engine.measure.probe"]  # from pkg import name


def test_no_engine_module_imports_itself_through_others():
    found = cycles(imports())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_the_engine_subpackages_form_layers():
    layers = subpackage_graph(imports())
    assert cycles(layers) == [], layers
    assert layers["engine.analytic"] == set()  # the pure layer imports no other


def test_the_plan_stands_on_the_pure_layer_and_the_standard_library_alone():
    """engine.planner (the plan's inputs, costs, vLLM config and report) imports only the
    analytic layer and the standard library, so the page, the API and the command line share
    it without a command-line module in between."""
    import sys

    layers = subpackage_graph(imports())
    assert layers["engine.planner"] == {"engine.analytic"}
    for package in ("planner", "analytic"):
        for path in sorted((ROOT / "engine" / package).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            outside = {
                (node.module if isinstance(node, ast.ImportFrom) else alias.name).split(".")[0]
                for node in ast.walk(tree) if isinstance(node, ast.Import | ast.ImportFrom)
                for alias in node.names} - set(sys.stdlib_module_names) - {"engine"}
            assert outside == set(), (path.name, outside)


def test_the_web_app_imports_no_command_line_module():
    found = []
    for path in sorted((ROOT / "app").rglob("*.py")):
        if path.name == "cli.py":  # the installed command itself
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                     else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
            found += [(path.name, n) for n in names
                      if n in ("engine.cli", "engine.cli.plan", "engine.serving.cli",
                               "engine.measure.commands")]
    assert found == []


def test_the_vllm_code_takes_its_prompts_from_the_prompt_sets_not_the_benchmark():
    graph = imports()
    vllm = [m for m in graph if m.startswith("engine.serving")]
    assert len(vllm) > 3, "no vLLM modules found in engine.serving: have they moved?"
    for module in vllm:
        assert not graph[module] & {"engine.measure.bench", "engine.measure.bench_results"}, (
            module)


def test_the_command_line_is_on_top_and_the_watch_and_trees_in_their_layers():
    """Nothing of the engine imports its command line (engine.cli: parse and dispatch); the
    watch (engine.serving.watch) stays with the vLLM code; the tree drafters are the
    decoder's, and the tree's arithmetic (shapes, yields) the pure layer's."""
    graph = imports()
    layers = subpackage_graph(graph)
    assert "engine.cli" in layers  # a package now
    assert not [m for m, targets in graph.items()
                if not m.startswith("engine.cli") and any(t.startswith("engine.cli.")
                                                           or t == "engine.cli" for t in targets)]
    assert {"engine.serving.watch.intervals", "engine.serving.watch.store",
            "engine.serving.watch.command"} <= set(graph)
    assert "engine.analytic.trees" in graph["engine.decoder.eagle_tree"]
    assert not graph["engine.analytic.trees"]


def top_level_names(path: Path) -> set[str]:
    """The functions, classes and names a module defines at its top level."""
    names = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names


def test_the_plan_is_the_planners_and_the_command_line_only_parses_and_dispatches():
    """The plan, its algorithm with its inputs and report, is engine.planner's: the pure layer
    defines none of the schedule's names (it keeps the measured costs' arithmetic), and
    engine.cli.plan builds the parser, reads the options and what the planner cannot read on
    the standard library alone, and hands the rest to engine.planner.command."""
    schedule = {"plan", "Plan", "Domain", "Range", "throughput", "plan_json", "make_plan"}
    for path in sorted((ROOT / "engine" / "analytic").glob("*.py")):
        assert not top_level_names(path) & schedule, path.name
    assert schedule - {"make_plan"} <= top_level_names(ROOT / "engine/planner/schedule.py")
    assert "make_plan" in top_level_names(ROOT / "engine/planner/command.py")
    graph = imports()
    assert "engine.planner.command" in graph["engine.cli.plan"]
    assert "engine.planner.schedule" in graph["engine.planner.command"]
    defined = {name for name in top_level_names(ROOT / "engine/cli/plan.py")
               if not name.isupper()}
    assert defined == {"add_parser", "_bounds", "inputs_from", "metrics_domains",
                       "this_machine_costs", "run"}
    planning = [node.func for node in ast.walk(ast.parse(
        (ROOT / "engine/cli/plan.py").read_text(encoding="utf-8")))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute)
        and (node.func.id if isinstance(node.func, ast.Name) else node.func.attr)
        in {"plan", "report", "file_costs", "drafter_costs", "alpha_source"}]
    assert planning == [], "engine.cli.plan plans itself instead of calling the planner"
