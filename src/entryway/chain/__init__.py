"""Adapters to EVM nodes over JSON-RPC."""
