"""``shared.protocol.memory`` is a package of small modules whose public names all stay importable from
the package itself, for MCP clients written against it, each loading only its own module on first use."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import shared.protocol.memory as package
import shared.protocol.memory_terms as terms

VOCABULARY = (
    "KINDS",
    "Kind",
    "MAX_HISTORY",
    "MAX_REINDEX_BATCH",
    "MAX_SEARCH_LIMIT",
    "RECALL_MODES",
    "RecallMode",
)
"""What the package has always handed on from :mod:`shared.protocol.memory_terms`."""


def _defined(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef | ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {name for name in names if not name.startswith("_")}


def test_every_public_name_of_the_contract_is_importable_from_the_package_as_its_owner_defines_it() -> None:
    owners = {
        f"{package.__name__}.{info.name}": _defined(Path(package.__path__[0]) / f"{info.name}.py")
        for info in pkgutil.iter_modules(package.__path__)
    }
    owners[terms.__name__] = set(VOCABULARY)
    assert sorted(package.__all__) == sorted(name for names in owners.values() for name in names)
    for owner, names in owners.items():
        module = importlib.import_module(owner)
        assert {name: getattr(package, name) is getattr(module, name) for name in names} == dict.fromkeys(
            names, True
        )


def test_a_name_the_package_does_not_hold_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError) as raised:
        package.SearchParameters  # noqa: B018
    assert str(raised.value) == "module 'shared.protocol.memory' has no attribute 'SearchParameters'"


LOADED_BY = """
import json, sys
import shared.protocol.memory
before = sorted(m for m in sys.modules if m.startswith("shared.protocol.memory."))
from shared.protocol.memory import SearchParams
after = sorted(m for m in sys.modules if m.startswith("shared.protocol.memory."))
print(json.dumps({"package": before, "SearchParams": after}))
"""


def test_importing_the_package_loads_no_module_of_it_and_a_name_loads_only_its_own() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LOADED_BY], capture_output=True, text=True, timeout=60, check=True
    )
    assert json.loads(result.stdout) == {
        "package": [],
        "SearchParams": [
            "shared.protocol.memory.admin",
            "shared.protocol.memory.meta",
            "shared.protocol.memory.records",
        ],
    }
