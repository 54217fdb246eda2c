"""What the HTTP API serves from: the store and one bundler per chain. Built by the
embedded runtime (`entryway up`) inside the server's lifespan, so nothing connects at import."""

from __future__ import annotations

from dataclasses import dataclass, field

from entryway.bundler.rpc_methods import BundlerRpc
from entryway.deploy.deployer import Deployment
from entryway.storage.store import Store


@dataclass(frozen=True, slots=True)
class ChainRuntime:
    chain_id: int
    rpc_url: str
    deployment: Deployment
    rpc: BundlerRpc


@dataclass
class Services:
    chains: dict[int, ChainRuntime] = field(default_factory=dict)
    _store: Store | None = None

    @property
    def store(self) -> Store:
        if self._store is None:
            raise RuntimeError("the service is not started")
        return self._store

    def attach(self, store: Store) -> None:
        self._store = store
