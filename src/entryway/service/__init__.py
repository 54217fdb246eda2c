"""The service: HTTP API (REST + JSON-RPC), the per-chain bundlers, wired in one place."""
