"""tools/conformance-setup.sh refuses what it cannot set up before it fetches anything."""

import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "tools" / "conformance-setup.sh"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *args], capture_output=True, text=True, timeout=60)


def test_an_unknown_release_gets_the_usage(tmp_path: Path) -> None:
    answer = run("v0.5", str(tmp_path / "suite"))
    assert answer.returncode == 2
    assert "Usage: tools/conformance-setup.sh RELEASE DIR" in answer.stderr
    assert "v0.8 (the suite's master branch), v0.7 or v0.6" in answer.stderr
    assert not (tmp_path / "suite").exists()


def test_an_unknown_option_gets_the_usage(tmp_path: Path) -> None:
    answer = run("v0.8", str(tmp_path / "suite"), "--mirror", "x")
    assert answer.returncode == 2
    assert "--suite-url" in answer.stderr


def test_an_existing_directory_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    answer = run("v0.7", str(tmp_path))
    assert answer.returncode == 1
    assert f"{tmp_path} already exists" in answer.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert answer.stdout == ""
