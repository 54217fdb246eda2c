"""The one root of Entryway's exceptions; every layer raises a subclass of it."""


class EntrywayError(Exception):
    """Base class of every error Entryway raises on purpose."""


class ConfigurationError(EntrywayError):
    """Settings, keys or files the operator supplied are missing or wrong."""
