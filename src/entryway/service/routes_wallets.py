"""Smart wallets: the counterfactual address of an account, and social recovery run by the
service (docs/wallets.md). A key sees only its own project's recoveries; any other id is 404."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import Field

from entryway.chain.rpc import RpcError, RpcTransportError
from entryway.domain.evm import checksum, hex_to_bytes, to_hex
from entryway.service.auth import CurrentCaller
from entryway.service.chain_access import NODE_RETRY_AFTER_S, ChainGate, require_chain_access
from entryway.service.problems import Problem
from entryway.service.schemas import Body, ChainId, Wire
from entryway.service.wallet_wiring import recovery_flow
from entryway.storage.store import Caller
from entryway.wallets.chain import counterfactual_address
from entryway.wallets.recoveries import RecoveryFlow
from entryway.wallets.recovery import Recovery, RecoveryState, StepState, typed_data
from entryway.wallets.refusals import RecoveryError

ADDRESS = r"^0x[0-9a-fA-F]{40}$"
ChainIdQuery = Annotated[int, Query(alias="chainId", ge=1, le=2**53)]
Address = Annotated[str, Field(pattern=ADDRESS)]


class WalletAddressOut(Wire):
    chain_id: int
    owner: str
    salt: str = Field(description="uint256, decimal")
    factory: str
    address: str
    deployed: bool


class RecoveryCreate(Body):
    chain_id: ChainId
    account: Address = Field(description="the smart account to recover")
    new_owner: Address = Field(description="who will own it")


class ApprovalCreate(Body):
    guardian: Address
    signature: str = Field(
        pattern=r"^0x[0-9a-fA-F]{130}$",
        description="the guardian's 65-byte signature of the recovery's typed data (EIP-712)",
    )


class ApprovalOut(Wire):
    guardian: str
    created_at: datetime


class StepOut(Wire):
    state: StepState
    task_id: str | None
    user_op_hash: str | None
    transaction_hash: str | None


class StartStepOut(StepOut):
    execute_after: int | None = Field(description="chain time (Unix seconds) it may finalize")
    executable_at: datetime | None


class RecoveryOut(Wire):
    id: str
    chain_id: int
    account: str
    new_owner: str
    recovery_nonce: int
    state: RecoveryState = Field(
        description="collecting, starting, started, finalized, cancelled or failed"
    )
    guardians: list[str]
    threshold: int
    approvals: list[ApprovalOut]
    approvals_needed: int = Field(description="approvals still missing for the threshold")
    typed_data: dict[str, Any] = Field(
        description="what each guardian signs (eth_signTypedData_v4)"
    )
    digest: str = Field(description="the EIP-712 digest of the typed data")
    start: StartStepOut
    finalize: StepOut
    failure_reason: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, r: Recovery) -> RecoveryOut:
        after = r.execute_after
        return cls(
            id=r.recovery_id, chain_id=r.chain_id, account=r.account, new_owner=r.new_owner,
            recovery_nonce=r.recovery_nonce, state=r.state, guardians=list(r.guardians),
            threshold=r.threshold,
            approvals=[ApprovalOut(guardian=a.guardian, created_at=a.created_at)
                       for a in r.approvals],
            approvals_needed=max(r.threshold - len(r.approvals), 0),
            typed_data=typed_data(r.account, r.new_owner, r.recovery_nonce, r.chain_id),
            digest=to_hex(r.digest),
            start=StartStepOut(
                state=r.start_step(), task_id=r.start.task_id,
                user_op_hash=r.start.user_op_hash, transaction_hash=r.start.transaction_hash,
                execute_after=after,
                executable_at=None if after is None else datetime.fromtimestamp(after, UTC),
            ),
            finalize=StepOut(
                state=r.finalize_step(), task_id=r.finalize.task_id,
                user_op_hash=r.finalize.user_op_hash,
                transaction_hash=r.finalize.transaction_hash,
            ),
            failure_reason=r.failure_reason, created_at=r.created_at, updated_at=r.updated_at,
        )  # fmt: skip


def _problem(exc: RecoveryError) -> Problem:
    return Problem(exc.status, exc.code, exc.title, exc.detail)


def _network_problem(chain_id: int, exc: RpcError | RpcTransportError) -> Problem:
    """503 naming the condition: an unreachable node in the transport's words (no host or
    exception text) with Retry-After, or the error the node answered."""
    if isinstance(exc, RpcTransportError):
        return Problem(
            503, "network_connection_problem", "Network connection problem",
            f"chain {chain_id}: {exc}", headers={"Retry-After": str(NODE_RETRY_AFTER_S)},
        )  # fmt: skip
    return Problem(
        503, "network_connection_problem", "Network connection problem",
        f"chain {chain_id}: the node failed ({exc})",
    )  # fmt: skip


def _flow(request: Request) -> RecoveryFlow:
    return recovery_flow(request.app.state.services)


def _count(request: Request, who: Caller, endpoint: str, chain_id: int) -> None:
    request.app.state.services.platform.meter.count_read(who, endpoint, chain_id)


def wallet_routes() -> APIRouter:
    router = APIRouter(tags=["wallets"])
    gate = ChainGate()

    @router.get("/v1/wallets/address", operation_id="getWalletAddress")
    async def wallet_address(
        who: CurrentCaller,
        request: Request,
        chain_id: ChainIdQuery,
        owner: Annotated[str, Query(pattern=ADDRESS)],
        salt: Annotated[int, Query(ge=0, le=2**256 - 1)] = 0,
    ) -> WalletAddressOut:
        """Where the smart account of `owner` (and `salt`) is, or will be once its first
        UserOperation deploys it: AccountFactory.getAddress on chain (free)."""
        chain = await gate.usable_chain(request, who, chain_id)
        factory = chain.deployment.account_factory
        try:
            address = await counterfactual_address(chain.eth, factory, owner, salt)
            deployed = bool(await chain.eth.get_code(address))
        except (RpcError, RpcTransportError) as exc:
            raise _network_problem(chain_id, exc) from None
        _count(request, who, "wallets-address", chain_id)
        return WalletAddressOut(
            chain_id=chain_id, owner=checksum(owner), salt=str(salt), factory=factory,
            address=address, deployed=deployed,
        )  # fmt: skip

    @router.post("/v1/recoveries", status_code=201, operation_id="createRecovery")
    async def create_recovery(
        who: CurrentCaller, request: Request, body: RecoveryCreate
    ) -> RecoveryOut:
        """Open a recovery of `account` to `newOwner`: its guardians, threshold and recovery
        nonce are read from chain, and `typedData` is what each guardian signs."""
        await gate.usable_chain(request, who, body.chain_id)
        try:
            recovery = await _flow(request).open(
                who.project_id, who.key_id, body.chain_id, body.account, body.new_owner
            )
        except RecoveryError as exc:
            raise _problem(exc) from None
        except (RpcError, RpcTransportError) as exc:
            raise _network_problem(body.chain_id, exc) from None
        _count(request, who, "recoveries", body.chain_id)
        return RecoveryOut.of(recovery)

    @router.post("/v1/recoveries/{recovery_id}/approvals", operation_id="addRecoveryApproval")
    async def add_approval(
        who: CurrentCaller, request: Request, recovery_id: str, body: ApprovalCreate
    ) -> RecoveryOut:
        """A guardian's approval, checked (it recovers to `guardian`, a guardian on chain).
        The one that reaches the threshold queues the start task (`start.taskId`)."""
        flow = _flow(request)
        try:
            recovery = await flow.view(who.project_id, recovery_id, follow=False)
            await gate.usable_chain(request, who, recovery.chain_id)
            recovery = await flow.approve(
                who.project_id, recovery_id, body.guardian, hex_to_bytes(body.signature)
            )
        except RecoveryError as exc:
            raise _problem(exc) from None
        except (RpcError, RpcTransportError) as exc:
            raise _network_problem(recovery.chain_id, exc) from None
        _count(request, who, "recoveries", recovery.chain_id)
        return RecoveryOut.of(recovery)

    @router.get("/v1/recoveries/{recovery_id}", operation_id="getRecovery")
    async def get_recovery(who: CurrentCaller, request: Request, recovery_id: str) -> RecoveryOut:
        """The recovery and each step's state, with its task ids; a started one is checked
        against the chain, so an owner's cancellation shows (free)."""
        flow = _flow(request)
        try:
            recovery = await flow.view(who.project_id, recovery_id, follow=False)
            # A key sees its project's recoveries on its own chains, as its approvals do.
            require_chain_access(who, recovery.chain_id)
            if recovery.state is RecoveryState.STARTED:
                try:
                    await gate.usable_chain(request, who, recovery.chain_id)
                    recovery = await flow.view(who.project_id, recovery_id)
                except (Problem, RpcError, RpcTransportError):
                    pass  # the chain cannot be asked now: what is known is the answer
        except RecoveryError as exc:
            raise _problem(exc) from None
        _count(request, who, "recoveries", recovery.chain_id)
        return RecoveryOut.of(recovery)

    return router
