"""Entryway: self-hostable ERC-4337 account-abstraction infrastructure."""

__version__ = "0.1.0"
