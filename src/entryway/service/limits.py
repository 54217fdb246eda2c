"""What one HTTP request may hold: its body's size, its JSON's nesting, and a JSON-RPC
batch's length and heavy calls. One frozen value, made by the composition root from the
settings (the config file's `[limits]` table, or ENTRYWAY_MAX_* variables) and passed to the
app; docs/api.md lists the defaults."""

from __future__ import annotations

from dataclasses import dataclass, fields

from entryway.errors import ConfigurationError

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True, slots=True)
class RequestLimits:
    # A JSON or urlencoded body, REST and JSON-RPC alike.
    max_body_bytes: int = 1 * MIB
    # A multipart/form-data body. Document uploads are held to 25 MiB by their own route;
    # this outer bound leaves room for the form around the document.
    max_upload_bytes: int = 26 * MIB
    # Arrays and objects nested in a JSON body; real payloads need fewer than ten.
    max_json_depth: int = 64
    # Calls in one JSON-RPC batch.
    max_rpc_batch: int = 100
    # Heavy calls in one batch: eth_estimateUserOperationGas, eth_sendUserOperation, pm_*
    # (each simulates the operation on the node or signs for it; see bundler/rpc_batch.py).
    max_rpc_batch_heavy: int = 10

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"{f.name} must be a positive integer, not {value!r}")
