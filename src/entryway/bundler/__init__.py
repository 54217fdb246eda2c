"""The ERC-4337 v0.8 bundler: validation, mempool, bundling, submission, receipts, gas.

Folders follow the pipeline an op travels: `rpc_types` (wire format) -> `validation`
(sanity, simulation, ERC-7562 tracing) -> `mempool` and `reputation` -> `bundling` ->
`submission` (transaction manager) -> `receipts`; `gas` estimates, `service` orchestrates
and `server` speaks JSON-RPC.
"""
