"""The package's structure: no import cycle inside nplmtk/ (counting imports inside
functions too), one table of models that `load` and `train-nplm -arch` read, no kernel
file over about 600 lines and no Python file of the library or the commands over 600."""
import ast
import os
import re
import subprocess
import sys

import pytest

import nplmtk

PACKAGE = os.path.dirname(nplmtk.__file__)
KERNELS = os.path.join(os.path.dirname(PACKAGE), "cython_ext")
LAZY_ENTRY = re.compile(r"\.[\w.]+:[\w.]+")  # nplmtk.models.LazyTable's entries


def module_name(path):
    relative = os.path.relpath(path, os.path.dirname(PACKAGE))[:-len(".py")].split(os.sep)
    return ".".join(relative[:-1] if relative[-1] == "__init__" else relative)


def imports_of(path, modules):
    """The nplmtk modules that the file at `path` imports, anywhere in it, the entries of
    a lazy table (".module:attribute", imported on first use) included."""
    name = module_name(path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            # `from . import container` imports the module nplmtk.container
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and LAZY_ENTRY.fullmatch(node.value):
            targets = [f"{package}{node.value.partition(':')[0]}"]
        else:
            continue
        found.update(target for target in targets if target in modules and target != name)
    return found


def import_graph():
    paths = {}
    for folder, _, files in os.walk(PACKAGE):
        for file in files:
            if file.endswith(".py"):
                path = os.path.join(folder, file)
                paths[module_name(path)] = path
    return {name: imports_of(path, paths) for name, path in paths.items()}


def find_cycle(graph):
    """A list of modules that import each other in a circle, or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == "open":
                return stack[stack.index(target):] + [target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        state[node] = "done"
        stack.pop()
        return None
    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def test_no_module_of_the_package_imports_itself_through_others():
    graph = import_graph()
    assert {"nplmtk.models", "nplmtk.mixture"} <= graph["nplmtk.neural.train"] | graph["nplmtk.models"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_opening_a_model_does_not_load_the_trainer():
    graph = import_graph()
    reached, todo = set(), ["nplmtk.models"]
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(graph[module])
    assert "nplmtk.neural.train" not in reached
    assert "nplmtk.neural.parallel" not in reached


def test_scoring_a_back_off_model_loads_no_network_and_no_estimator(tmp_path):
    from nplmtk.ngram.binary import write_binary
    from nplmtk.models import load
    arpa = os.path.join(os.path.dirname(__file__), "data", "srilm", "kn3-backoff.arpa.gz")
    binary = str(tmp_path / "small.nplm")
    write_binary(load(arpa), binary)
    script = ("import sys\nfrom nplmtk.cli.main import main\ntry:\n    main(['ppl', '-lm', sys.argv[1], '-text', "
              "sys.argv[2]])\nexcept SystemExit:\n    pass\nprint(sorted(m for m in sys.modules if m.startswith(("
              "'nplmtk.neural', 'nplmtk.mixture', 'nplmtk.ngram.estimate', 'nplmtk.ngram.classes'))))")
    text = tmp_path / "text.txt"
    text.write_text("a b c\n")
    for model in (arpa, binary):
        out = subprocess.run([sys.executable, "-c", script, model, str(text)], capture_output=True, text=True,
                             check=True).stdout
        assert "ppl=" in out and out.strip().endswith("[]"), out


def test_every_architecture_and_model_kind_comes_from_one_table():
    from cli.train import command
    from nplmtk.models import ARCHITECTURES, MODEL_KINDS
    help_text = next(p for p in command.params if p.name == "arch").help
    for name, model in ARCHITECTURES.items():
        assert f"{name} ({model.summary})" in help_text
        assert MODEL_KINDS[model.kind].__self__ is model  # its files open as that class


@pytest.mark.parametrize("suffix", [".pyx", ".pxd"])
def test_no_kernel_file_is_over_about_600_lines(suffix):
    for file in os.listdir(KERNELS):
        if file.endswith(suffix):
            with open(os.path.join(KERNELS, file), encoding="utf-8") as f:
                assert sum(1 for _ in f) <= 650, file


def test_no_python_file_of_the_library_or_the_commands_is_over_600_lines():
    top = os.path.dirname(PACKAGE)
    for folder in ("nplmtk", "cli"):
        for root, _, files in os.walk(os.path.join(top, folder)):
            for file in files:
                if file.endswith(".py"):
                    with open(os.path.join(root, file), encoding="utf-8") as f:
                        assert sum(1 for _ in f) <= 600, os.path.join(root, file)
