"""Operations: a project's recent UserOperations (status as /op-status reports it, credits
charged, explorer links), the sends the bundler refused (from the request log, with the
reason), its notarizations with their proofs to download, its tasks, and the deposit of each
paymaster (one per EntryPoint release) on each of its chains. Webhooks and sponsorship
policies have pages of their own (webhook_pages, policy_pages)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import dataclass

from fastapi import APIRouter, Request
from fastapi.responses import Response

from entryway.dashboard import web
from entryway.domain.networks import NETWORKS, Network
from entryway.domain.notarization import Notarization, NotarizationStatus
from entryway.paymaster.deposit import DepositStatus, PaymasterDeposit
from entryway.service.downloads import attachment
from entryway.service.op_report import is_local
from entryway.service.refused_ops import latest_refusals
from entryway.service.services import Services
from entryway.storage.project_activity import ProjectActivity, SentOp
from entryway.storage.tasks import TaskQueue

log = logging.getLogger(__name__)

NOTHING = "\u2013"  # an en dash: no figure
RECENT_OPS = 25
RECENT_NOTARIZATIONS = 20
RECENT_TASKS = 20
RECENT_REFUSALS = 20
GOOD_STATUSES = {"included", "anchored", "succeeded", "delivered"}
BAD_STATUSES = {"failed", "dropped", "dead", "not_found", "unavailable"}


@dataclass(frozen=True, slots=True)
class OpRow:
    op: SentOp
    network: Network | None
    status: str  # as /op-status reports it; "unavailable" when the chain could not be asked
    tx_hash: str | None
    reason: str | None
    credits: int  # its relay and, if sponsored, its sponsorship
    credits_final: bool  # False while the sponsorship is held, awaiting the receipt
    local: bool = False  # its chain is a devnet on this machine: no public explorer knows it


@dataclass(frozen=True, slots=True)
class NotarizationRow:
    notarization: Notarization
    network: Network | None

    @property
    def anchored(self) -> bool:
        return self.notarization.status is NotarizationStatus.ANCHORED

    @property
    def anchor_tx(self) -> str | None:
        batch = self.notarization.batch
        if batch is None or batch.anchor is None:
            return None
        return "0x" + batch.anchor.transaction_hash.hex()


@dataclass(frozen=True, slots=True)
class DepositRow:
    chain_id: int
    network: Network | None
    deposit: PaymasterDeposit | None  # None: this service does not run the chain

    @property
    def version(self) -> str | None:
        """The EntryPoint release the paymaster serves."""
        return None if self.deposit is None else self.deposit.version.value

    @property
    def reading(self) -> DepositStatus | None:
        """None: not read yet, or this service does not run the chain."""
        return None if self.deposit is None else self.deposit.reading

    @property
    def amount(self) -> str:
        return NOTHING if self.reading is None else self._in_token(self.reading.deposit_wei)

    @property
    def threshold(self) -> str:
        return NOTHING if self.reading is None else self._in_token(self.reading.threshold_wei)

    def _in_token(self, wei: int) -> str:
        return in_token(wei, self.network)


def in_token(wei: int, network: Network | None) -> str:
    """An amount of the chain's native token: "10,000 POL" (in ether units off the list)."""
    token = network.native_token if network else None
    decimals, symbol = (token.decimals, token.symbol) if token else (18, "")
    return f"{native_amount(wei, decimals)} {symbol}".strip()


def native_amount(wei: int, decimals: int = 18, places: int = 6) -> str:
    """An amount in the token's units, with at most `places` decimals (cut, never rounded up:
    a deposit is never shown larger than it is), exact integer arithmetic."""
    whole, rest = divmod(wei, 10**decimals)
    shown = rest // 10 ** max(decimals - places, 0)
    fraction = f"{shown:0{min(places, decimals)}d}".rstrip("0")
    return f"{whole:,}.{fraction}" if fraction else f"{whole:,}"


def status_tone(status: str) -> str:
    """The badge class of a status: ok, bad or warn (still moving)."""
    if status in GOOD_STATUSES:
        return "ok"
    return "bad" if status in BAD_STATUSES else "warn"


async def op_row(services: Services, project_id: str, op: SentOp) -> OpRow:
    """One op as /op-status answers it: the bundler's status, the ledger's credits."""
    status, tx_hash, reason = "unavailable", None, None
    chain = services.chains.get(op.chain_id)
    if chain is not None:
        try:
            found = await chain.rpc.op_status([op.user_op_hash])
        except Exception:  # one chain away must not take the page down
            log.warning("cannot read the status of %s on chain %d", op.user_op_hash, op.chain_id)
        else:
            status = str(found.get("status", "unavailable"))
            tx_hash = found.get("transactionHash")
            reason = found.get("reason")
    credits, final = await services.store.ledger.credits_for(project_id, op.user_op_hash.lower())
    local = chain is not None and is_local(chain)
    return OpRow(op, NETWORKS.get(op.chain_id), status, tx_hash, reason, credits, final, local)


async def notarization_rows(services: Services, project_id: str) -> list[NotarizationRow] | None:
    """The latest notarizations, or None when this service notarizes nothing."""
    if services.notary is None:
        return None
    ids = await ProjectActivity(services.store.engine).notarization_ids(
        project_id, limit=RECENT_NOTARIZATIONS
    )
    found = await services.notary.many(project_id, ids)
    return [NotarizationRow(n, NETWORKS.get(n.chain_id)) for n in found]


def deposit_rows(services: Services, chains: Iterable[int]) -> list[DepositRow]:
    """A row per paymaster of each chain, v0.8's first; a bare row for a chain this service
    does not run."""
    rows = []
    for chain_id in sorted(chains):
        deposits: list[PaymasterDeposit | None] = [*services.deposits_on(chain_id)] or [None]
        rows += [DepositRow(chain_id, NETWORKS.get(chain_id), d) for d in deposits]
    return rows


def routes() -> APIRouter:
    router = APIRouter()

    @router.get("/projects/{project_id}/operations")
    async def operations(request: Request, project_id: str, who: web.SignedIn) -> Response:
        page = await web.project_page(request, who, project_id)
        services = web.services(request)
        sent = await ProjectActivity(services.store.engine).user_operations(
            project_id, limit=RECENT_OPS
        )
        ops = await asyncio.gather(*(op_row(services, project_id, op) for op in sent))
        context = {
            "page": page,
            "section": "operations",
            "ops": ops,
            "refusals": await latest_refusals(services, project_id, RECENT_REFUSALS),
            "notarizations": await notarization_rows(services, project_id),
            "tasks": await TaskQueue(services.store.engine).list(project_id, limit=RECENT_TASKS),
            "deposits": deposit_rows(services, page.project.chains),
            "sponsoring": services.paymaster is not None,
            "tone": status_tone,
            "networks": NETWORKS,
            "shown_at": web.now(),
        }
        return web.render(request, who, "operations.html", context)

    @router.get("/projects/{project_id}/notarizations/{notarization_id}/proof")
    async def proof(
        request: Request, project_id: str, notarization_id: str, who: web.SignedIn
    ) -> Response:
        """The `entryway-proof/1` document, as the REST route serves it, to download."""
        await web.project_page(request, who, project_id)
        notary = web.services(request).notary
        found = None
        if notary is not None and len(notarization_id) <= 36:
            found = await notary.get(project_id, notarization_id)
        if notary is None or found is None:
            raise web.PageNotFoundError
        document = await notary.proof(found)
        if document is None:
            raise web.DashboardError(
                409,
                f"Notarization {notarization_id} is {found.status.value}: its proof exists "
                "once its batch is anchored on chain.",
            )
        name = f"notarization-{notarization_id}-proof.json"
        return attachment(document.to_json().encode(), name, name)

    return router
