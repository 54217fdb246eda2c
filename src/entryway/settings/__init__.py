"""Typed settings: a TOML file with ENTRYWAY_* variables over it, validated at start."""

from entryway.settings.loading import SettingsError, load_settings
from entryway.settings.model import ChainSettings, Settings

__all__ = ["ChainSettings", "Settings", "SettingsError", "load_settings"]
