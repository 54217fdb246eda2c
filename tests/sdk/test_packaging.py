"""The SDK stands alone: it imports nothing of the service and only its four light
dependencies, and ships its ABIs and type information."""

from __future__ import annotations

import subprocess
import sys
import tomllib

from tests.sdk.conftest import SDK_SRC

LIGHT = {"httpx", "eth-account", "eth-abi", "eth-utils"}


def test_the_declared_dependencies_are_the_light_four() -> None:
    project = tomllib.loads((SDK_SRC.parent / "pyproject.toml").read_text())["project"]
    names = {d.split(">")[0].split("=")[0].split("[")[0].strip() for d in project["dependencies"]}
    assert project["name"] == "entryway-sdk" and names == LIGHT


def test_importing_the_sdk_loads_nothing_of_the_service() -> None:
    probe = (
        f"import sys; sys.path.insert(0, {str(SDK_SRC)!r}); import entryway_sdk.sync; "
        "heavy = {'entryway', 'fastapi', 'sqlalchemy', 'uvicorn', 'typer'} & set(sys.modules); "
        "print(sorted(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"
    package = SDK_SRC / "entryway_sdk"
    assert (package / "py.typed").exists()
    assert {p.name for p in (package / "abi").iterdir()} == {
        "AccountFactory.json",
        "EntryPoint.json",
        "NotaryAnchor.json",
        "SmartAccount.json",
    }
