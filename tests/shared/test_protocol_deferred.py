"""Importing the wire contracts builds none of their models: each is built by its first use.

A fresh interpreter imports every module of ``shared.protocol`` and the channel kit's server (which
adds its own requests), and lists the pydantic models they define that are already complete
(built). Run in a subprocess so that no other test has used a model yet; the second half checks
that a deferred model still validates, dumps and gives its schema, and that a request's method is
read from its field list without building it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Literal

from pydantic import BaseModel

from shared.protocol.control import method_name
from shared.protocol.deferred import WireParams, WireRequest, WireResult
from shared.protocol.memory.admin import SearchParams, SearchRequest

LIST_BUILT = """
import importlib, json, pkgutil
import pydantic
import shared.protocol as package
names = [m.name for m in pkgutil.walk_packages(package.__path__, "shared.protocol.")]  # audit is a package
names.append("shared.channelkit.server")  # the kit's own permission-prompt requests
models = [
    value
    for module in map(importlib.import_module, names)
    for value in vars(module).values()
    if isinstance(value, type)
    and issubclass(value, pydantic.BaseModel)
    and value.__module__ == module.__name__
    and not value.__pydantic_generic_metadata__["parameters"]  # a generic base: nothing to validate
]
built = sorted(m.__qualname__ for m in models if m.__pydantic_complete__)
print(json.dumps({"models": len(models), "built": built}))
"""


def test_no_protocol_model_is_built_by_importing_the_contracts() -> None:
    result = subprocess.run(
        [sys.executable, "-c", LIST_BUILT], capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(result.stdout)
    assert found["models"] > 200  # every contract was imported: the check looked at something
    assert found["built"] == []


class _EchoParams(WireParams):
    text: str


class _EchoRequest(WireRequest[_EchoParams, Literal["test/echo"]]):
    method: Literal["test/echo"] = "test/echo"


class _EchoResult(WireResult):
    echoed: str


def _built(model: type[BaseModel]) -> bool:
    return model.__pydantic_complete__


def test_a_deferred_model_builds_itself_on_first_use() -> None:
    assert not _built(_EchoRequest)
    assert method_name(_EchoRequest) == "test/echo"  # read from the field list, without building
    request = _EchoRequest.model_validate({"method": "test/echo", "params": {"text": "hi"}})
    assert request.model_dump(by_alias=True, exclude_none=True) == {
        "method": "test/echo",
        "params": {"text": "hi"},
    }
    assert _built(_EchoRequest)
    assert _EchoResult.model_json_schema()["required"] == ["echoed"]
    assert method_name(SearchRequest) == "nexo/memory/search"
    assert SearchParams.model_validate({"agent": "default", "query": "ana"}).query == "ana"
