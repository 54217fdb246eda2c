"""A chain's `bundling` setting: in-process by default; with "intake" the API process needs
no executor key (the chain's bundler leader holds them)."""

from __future__ import annotations

from pathlib import Path

from entryway.settings import load_settings
from tests.unit.test_settings import chain_table, clean_environment, problems, write

__all__ = ["clean_environment"]  # the autouse fixture, applied here too


def test_bundling_is_in_process_unless_set(tmp_path: Path) -> None:
    settings = load_settings(write(tmp_path, chain_table(tmp_path)))
    assert settings.chains[0].bundling == "in_process"
    intake = load_settings(write(tmp_path, chain_table(tmp_path, extra='bundling = "intake"')))
    assert intake.chains[0].bundling == "intake"


def test_only_intake_bundling_goes_without_executor_keys(tmp_path: Path) -> None:
    without = chain_table(tmp_path).replace(
        f'executor_key_files = ["{tmp_path / "keys" / "executor.key"}"]', "executor_key_files = []"
    )
    assert "executor_key_files = []" in without
    [problem] = problems(write(tmp_path, without))
    assert problem.startswith("chains[0].executor_key_files: ")
    assert 'bundling = "intake"' in problem
    api_only = load_settings(write(tmp_path, without + 'bundling = "intake"\n'))
    assert api_only.chains[0].executor_key_files == []
    assert problems(write(tmp_path, chain_table(tmp_path, extra='bundling = "elsewhere"')))
