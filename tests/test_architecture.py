"""The layering of SPEC §1 and of the engine's subpackages (``server/sowdb/engine/README.md``).

The engine, filter language, storage and config never import grpc. Inside the engine, each
subpackage is a layer that imports only the layers below it, and only through their
``__init__`` (the names in its ``__all__``), never their modules; the rest of the server sees
the engine through ``sowdb.engine`` and its shared root modules only. And the tests start an
in-process server one way: through ``tests/support.py``.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server" / "sowdb"
ENGINE = SERVER / "engine"

LAYERS: dict[str, set[str]] = {  # subpackage -> the subpackages it may import
    "arena": set(),
    "state": {"arena"},
    "journal": {"arena", "state"},
    "read": {"arena", "state", "journal"},
    "live": {"arena", "state", "journal", "read"},
    "write": {"arena", "state", "journal", "read", "live"},
}
# root modules that compose the subpackages
FACADE = {"__init__", "engine", "upkeep", "stats", "replication", "feed", "reader", "group_figures"}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) of every ``from … import …`` and ``import …`` in ``path``."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module, [a.name for a in node.names]))
        elif isinstance(node, ast.Import):
            out.extend((a.name, []) for a in node.names)
    return out


def _engine_target(module: str) -> tuple[str, str] | None:
    """(subpackage or "", module inside it or "") of an import of the engine, else None."""
    parts = module.split(".")
    if parts[:2] != ["sowdb", "engine"]:
        return None
    if len(parts) > 2 and parts[2] in LAYERS:
        return parts[2], ".".join(parts[3:])
    return "", ".".join(parts[2:])


def _where(path: Path) -> tuple[str | None, str]:
    """(subpackage of the engine or "" for its root, None outside the engine; module name)."""
    rel = path.relative_to(SERVER).parts
    if rel[0] != "engine":
        return None, path.stem
    return (rel[1] if len(rel) > 2 else ""), path.stem


def test_engine_storage_and_expr_never_import_grpc() -> None:
    code = (
        "import sys, sowdb.engine, sowdb.expr, sowdb.storage, sowdb.config, sowdb.errors;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('grpc', 'sowdb_api', 'google'));"
        "print(' '.join(bad)); sys.exit(1 if bad else 0)"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"protocol modules imported below the API layer: {run.stdout}{run.stderr}"


def test_each_subpackage_exports_its_public_names() -> None:
    for name in LAYERS:
        init = ENGINE / name / "__init__.py"
        tree = ast.parse(init.read_text())
        assert ast.get_docstring(tree), f"{init} says what the subpackage owns"
        assert any(
            isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in n.targets)
            for n in tree.body
        ), f"{init} lists its public names in __all__"


def test_subpackages_are_layers_imported_through_their_packages() -> None:
    exported = {name: set(__import__(f"sowdb.engine.{name}", fromlist=["__all__"]).__all__) for name in LAYERS}
    bad: list[str] = []
    for path in sorted(SERVER.rglob("*.py")):
        here, stem = _where(path)
        for module, names in _imports(path):
            target = _engine_target(module)
            if target is None or target[0] == here:
                continue
            pkg, inner = target
            where = f"{path.relative_to(SERVER)}: {module}"
            if pkg and inner:
                bad.append(f"{where} (a module of {pkg}/: import from sowdb.engine.{pkg})")
            elif pkg and not set(names) <= exported[pkg]:
                bad.append(f"{where} {sorted(set(names) - exported[pkg])} (not in {pkg}/__init__'s __all__)")
            elif here is None and pkg:
                bad.append(f"{where} (outside the engine: import from sowdb.engine, the facade)")
            elif here and pkg and pkg not in LAYERS[here]:
                bad.append(f"{where} ({here}/ is below {pkg}/)")
            elif here and not pkg and inner in FACADE:
                bad.append(f"{where} (a subpackage imports the facade)")
            elif here == "" and stem not in FACADE and pkg:
                bad.append(f"{where} (a shared root module imports a subpackage)")
    assert not bad, "imports across the engine's layers:\n" + "\n".join(bad)


def test_one_owner_knows_the_private_views() -> None:
    """Aggregated subscriptions' private views are named and recognised in live/private.py only."""
    checks = re.compile(r'x00aggregate|(topic|name|t)\.startswith\("\\x00"\)')
    owners = {str(p.relative_to(ENGINE)) for p in ENGINE.rglob("*.py") if checks.search(p.read_text())}
    assert owners == {"live/private.py"}


def test_modules_stay_small() -> None:
    long = [
        f"{p.relative_to(SERVER)}: {n}" for p in SERVER.rglob("*.py") if (n := len(p.read_text().splitlines())) > 400
    ]
    assert not long, f"modules over 400 lines: {long}"


CLUSTER = SERVER / "cluster"
ROOT = SERVER.parents[1]


def _attributes(path: Path) -> set[str]:
    return {n.attr for n in ast.walk(ast.parse(path.read_text(), str(path))) if isinstance(n, ast.Attribute)}


def test_the_cluster_reaches_the_engine_only_through_its_replication_port() -> None:
    """cluster/ imports of the engine only its port (and the clock a node follows), and never
    touches an engine's writer or store: the engine's insides may change under it."""
    allowed = {"sowdb.engine.replication", "sowdb.engine.clock"}
    bad = [
        f"{path.relative_to(SERVER)}: {module}"
        for path in sorted(CLUSTER.rglob("*.py"))
        for module, _ in _imports(path)
        if module.startswith("sowdb.engine") and module not in allowed
    ]
    bad += [
        f"{path.relative_to(SERVER)}: .{attr}"
        for path in sorted(CLUSTER.rglob("*.py"))
        for attr in sorted(_attributes(path) & {"writer", "store"})
    ]
    assert not bad, "the cluster past the engine's replication port:\n" + "\n".join(bad)


def test_only_the_dcs_talks_to_etcd() -> None:
    """One door to etcd (Patroni's ``dcs/``): nothing else imports the etcd client."""
    dcs = CLUSTER / "dcs"
    bad = [
        f"{path.relative_to(SERVER)}: {module}"
        for path in sorted(SERVER.rglob("*.py"))
        if dcs not in path.parents
        for module, _ in _imports(path)
        if module == "aetcd" or module.startswith(("aetcd.", "sowdb.cluster.dcs.etcd"))
    ]
    assert not bad, "etcd reached around sowdb.cluster.dcs:\n" + "\n".join(bad)


def test_one_owner_moves_the_committed_point() -> None:
    """The engine's commit and hold methods are called from cluster/commit.py alone (the port
    defines them; the engine and its servers are below or beside the cluster)."""
    owned = {"deliver_upto", "hold_reads", "guard_writes", "shown_upto"}
    bad = [
        f"{path.relative_to(SERVER)}: .{attr}"
        for path in sorted(CLUSTER.rglob("*.py"))
        if path.name != "commit.py"
        for attr in sorted(_attributes(path) & owned)
    ]
    assert not bad, "the committed point moved outside cluster/commit.py:\n" + "\n".join(bad)


def test_the_cluster_serves_no_grpc_of_its_own() -> None:
    """Services live in api/, behind the one error boundary: cluster/ imports nothing of api/."""
    bad = [
        f"{path.relative_to(SERVER)}: {module}"
        for path in sorted(CLUSTER.rglob("*.py"))
        for module, _ in _imports(path)
        if module.startswith("sowdb.api")
    ]
    assert not bad, "cluster/ imports the protocol layer:\n" + "\n".join(bad)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_arrows_point_one_way_between_the_packages() -> None:
    """The SDK never imports the server, and neither the server, the SDK nor tools/ import tests/."""
    rules = {ROOT / "clients" / "python": ("sowdb", "tests"), SERVER: ("tests",), ROOT / "tools": ("tests",)}
    bad = [
        f"{path.relative_to(ROOT)}: {module}"
        for top, banned in rules.items()
        for path in sorted(top.rglob("*.py"))
        for module, _ in _imports(path)
        if any(_within(module, b) for b in banned)
    ]
    assert not bad, "imports against the arrows:\n" + "\n".join(bad)


TESTS = ROOT / "tests"


def _names_sowserver(func: ast.expr) -> bool:
    return (isinstance(func, ast.Name) and func.id == "SowServer") or (
        isinstance(func, ast.Attribute) and func.attr == "SowServer"
    )


def test_the_tests_start_an_in_process_server_one_way() -> None:
    """A test starts a :class:`SowServer` in process through ``tests/support.py`` alone
    (``serving()``, ``running()``), which always stops what it started: no module of tests/
    constructs one by hand, nor imports the class under another name to do so (issue 38)."""
    allowed = {TESTS / "support.py"}
    bad = [
        f"{path.relative_to(ROOT)}:{node.lineno}"
        for path in sorted(TESTS.rglob("*.py"))
        if path not in allowed
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if (isinstance(node, ast.Call) and _names_sowserver(node.func))
        or (isinstance(node, ast.alias) and node.name == "SowServer" and node.asname not in (None, "SowServer"))
    ]
    assert not bad, "SowServer constructed outside tests/support.py (use serving() or running()):\n" + "\n".join(bad)
