"""Running totals of what a bundler did since it started, for the metrics endpoint. Plain
integers: the bundler knows nothing of Prometheus; the service reads these when scraped."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class BundlerCounts:
    bundles_sent: int = 0
    bundle_gas_used: int = 0  # gas of the mined bundles, from their receipts
    ops_included: int = 0  # in a mined bundle, their execution succeeded
    ops_reverted: int = 0  # in a mined bundle, their execution reverted (the gas was paid)
    ops_dropped: int = 0  # left the mempool without a bundle: expired, failed a check, lost
    bundles_reverted: int = 0  # mined, yet reverted whole: an op's validation failed on chain
