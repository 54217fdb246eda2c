"""ERC-7677 paymaster web service methods for EntryPoints v0.6 to v0.9, transport-free.

`pm_getPaymasterStubData(userOp, entryPoint, chainId, context)` answers the paymaster fields
to estimate gas with: the final data's length and code path (a signature that recovers to no
signer), the paymaster's gas limits, `isFinal: false`. `pm_getPaymasterData` with the same
parameters checks the policy again, holds the estimated cost and answers the signed data,
valid for `validity_s` seconds after the chain's latest block time (or the service's clock,
when that block is older). For EntryPoint v0.6 both
take and answer its unpacked form: the answer is `paymasterAndData` (erc7677_v06.py).

The service's JSON-RPC endpoint routes `pm_*` methods to `PaymasterRpc.dispatch` with the
caller's project, key and chain; errors are `BundlerError`s carrying ERC-4337 codes: -32602
for bad parameters (an unsupported entry point or chain, an unknown policy, gas or fees
above the chain's sanity bounds), -32501 when a policy refuses or the hold would take the
project's overage past the spending budget its owner set, with `data: {"rule", "policyId"}`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from entryway.bundler.errors import BundlerError, RpcErrorCode, invalid_params, node_failure
from entryway.bundler.rpc_types import parse_address, parse_quantity, parse_user_operation
from entryway.bundler.validation.sanity import SanityLimits, check_bounds, check_op_gas
from entryway.chain.rpc import EthClient, RpcError, RpcTransportError
from entryway.domain.bounds import unprintable
from entryway.domain.entry_points import EntryPointVersion, version_at
from entryway.domain.evm import checksum, to_hex
from entryway.domain.paymaster_signature import PAYMASTER_DATA_OFFSET, split_paymaster_signature
from entryway.domain.pricebook import PriceBook
from entryway.domain.sponsorship import Rule, SponsorInfo
from entryway.domain.userop import UserOperation, user_op_hash
from entryway.domain.userop_v06 import user_op_hash_v06
from entryway.paymaster.erc7677_v06 import (
    as_charged_v06,
    fields_v06,
    unsigned_op_v06,
    with_paymaster_v06,
)
from entryway.paymaster.gate import (
    SponsorshipAsk,
    SponsorshipGate,
    SponsorshipRefusedError,
    SponsorshipTicket,
)
from entryway.paymaster.ports import (
    IssuedSignature,
    PolicySource,
    SignatureLog,
    SponsorshipLedger,
    SponsorshipUsage,
)
from entryway.paymaster.signer import (
    PaymasterSigner,
    ValidityWindow,
    stub_paymaster_data,
    with_paymaster_gas,
)

MAX_POLICY_ID = 64
STUB_METHOD = "pm_getPaymasterStubData"
DATA_METHOD = "pm_getPaymasterData"
_UNSET_FIELDS = (
    "callGasLimit",
    "verificationGasLimit",
    "preVerificationGas",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
)


@dataclass(frozen=True, slots=True)
class PaymasterCaller:
    """Who asks: the API key's project and key, and the chain of the endpoint called."""

    project_id: str
    key_id: str | None
    chain_id: int


@dataclass(frozen=True, slots=True)
class PaymasterChain:
    """One chain the paymaster serves; `block_time` reads its latest block's timestamp;
    `limits` are the chain's sanity bounds, which every op shown to the paymaster must meet."""

    chain_id: int
    entry_point: str
    paymaster: str
    block_time: Callable[[], Awaitable[int]]
    limits: SanityLimits = field(default_factory=SanityLimits)
    # The paymaster contracts of the chain's other EntryPoints: (EntryPoint, paymaster) pairs.
    also: tuple[tuple[str, str], ...] = ()

    @classmethod
    def on(
        cls,
        eth: EthClient,
        chain_id: int,
        entry_point: str,
        paymaster: str,
        also: Mapping[str, str] | None = None,
    ) -> PaymasterChain:
        """`also`: EntryPoint -> its paymaster contract, for each other EntryPoint served."""

        async def block_time() -> int:
            return int((await eth.get_block("latest"))["timestamp"], 16)

        limits = SanityLimits.for_chain(chain_id)
        pairs = tuple((checksum(ep), checksum(pm)) for ep, pm in (also or {}).items())
        return cls(chain_id, checksum(entry_point), checksum(paymaster), block_time, limits, pairs)

    @property
    def parallel(self) -> bool:
        """Whether the paymaster signs in v0.9's paymasterSignature, beside the account."""
        return version_at(self.entry_point) is EntryPointVersion.V09

    @property
    def v06(self) -> bool:
        """Whether this is EntryPoint v0.6's paymaster (the unpacked op, no paymaster gas)."""
        return version_at(self.entry_point) is EntryPointVersion.V06

    @property
    def entry_points(self) -> list[str]:
        return [self.entry_point, *(ep for ep, _ in self.also)]

    def at(self, entry_point: str) -> PaymasterChain | None:
        """This chain as the paymaster of `entry_point` (its own contract), if it serves it."""
        if entry_point.lower() == self.entry_point.lower():
            return self
        for ep, pm in self.also:
            if ep.lower() == entry_point.lower():
                return replace(self, entry_point=ep, paymaster=pm, also=())
        return None


@dataclass(frozen=True, slots=True)
class PaymasterSettings:
    validity_s: int = 900
    # validAfter lies this far before the latest block: a node's pending block (and another
    # node's clock) may trail it by a second or two, and "not due yet" would drop the op.
    clock_skew_s: int = 60
    # VerifyingPaymaster's validation: one ecrecover, one cold storage read and hashing the
    # op, its call data and initCode in memory (measured: 20k for a small op, 84k at 100 KB);
    # this base plus a per-size allowance (`paymaster_verification_gas`).
    verification_gas: int = 60_000
    post_op_gas: int = 0  # it has no postOp
    # A client may sign over larger limits than ours (after its own estimate); not beyond these.
    max_verification_gas: int = 500_000
    max_post_op_gas: int = 500_000
    sponsor: SponsorInfo = field(default_factory=lambda: SponsorInfo("Entryway"))

    def window(self, now: int) -> ValidityWindow:
        """A signature's window for an op signed at `now` (`signing_time`)."""
        return ValidityWindow(
            valid_until=now + self.validity_s, valid_after=max(now - self.clock_skew_s, 0)
        )


def paymaster_verification_gas(op: UserOperation, base: int) -> int:
    """Gas for VerifyingPaymaster to validate `op`: copying and hashing the call data and
    initCode costs per 32-byte word, and memory grows quadratically (here with 2x headroom)."""
    words = -(-(len(op.call_data) + len(op.init_code)) // 32)
    return base + 16 * words + words * words // 256


def _utc_now() -> datetime:
    return datetime.now(UTC)


class PaymasterRpc:
    def __init__(
        self,
        chains: Mapping[int, PaymasterChain],
        signer: PaymasterSigner,
        policies: PolicySource,
        usage: SponsorshipUsage,
        ledger: SponsorshipLedger,
        prices: PriceBook,
        *,
        settings: PaymasterSettings | None = None,
        clock: Callable[[], datetime] = _utc_now,
        on_hold: Callable[[str], None] | None = None,
        signatures: SignatureLog | None = None,
    ) -> None:
        self.chains = dict(chains)
        # Each signature is recorded here before it is returned (billing follows the chain).
        self.signatures = signatures
        self.on_hold = on_hold  # told the project of each new hold (its credit alerts)
        self.signer = signer
        self.gate = SponsorshipGate(policies, usage, ledger, prices)
        self.settings = settings or PaymasterSettings()
        self.clock = clock
        self.methods = {STUB_METHOD: self.stub_data, DATA_METHOD: self.data}

    def rotate_signer(self, signer: PaymasterSigner) -> None:
        """Sign with `signer` from now on (it must already be a signer on chain)."""
        self.signer = signer

    async def dispatch(self, method: str, params: list[Any], caller: PaymasterCaller) -> Any:
        handler = self.methods.get(method)
        if handler is None:
            raise BundlerError(RpcErrorCode.METHOD_NOT_FOUND, f"method {method} not found")
        if not isinstance(params, list):
            raise invalid_params("params must be an array")
        try:
            return await handler(params, caller)
        except (RpcError, RpcTransportError) as exc:
            raise node_failure(exc) from exc

    # ------------------------------------------------------------------ methods

    async def stub_data(self, params: list[Any], caller: PaymasterCaller) -> dict[str, Any]:
        chain, op, policy_id = self._request(params, caller)
        draft = self._with_gas(chain, op)
        ticket = await self._check(caller, _as_charged(chain, draft), policy_id)
        window = await self._window(chain, op)
        return {
            **self._fields(chain, draft, stub_paymaster_data(window, parallel=chain.parallel)),
            "isFinal": False,
            "sponsor": self._sponsor(ticket),
        }

    async def data(self, params: list[Any], caller: PaymasterCaller) -> dict[str, Any]:
        chain, op, policy_id = self._request(params, caller)
        draft = self._with_gas(chain, op)
        # Signed as it will be sent: its gas summed (ours included) must fit an op's bound.
        check_op_gas(draft, chain.limits)
        charged = _as_charged(chain, draft)
        ask = SponsorshipAsk(caller.project_id, caller.chain_id, charged, policy_id, self.clock())
        window = await self._window(chain, op)  # before the hold: a node error holds nothing
        try:
            ticket = await self.gate.hold(ask, key_id=caller.key_id, endpoint=DATA_METHOD)
        except SponsorshipRefusedError as exc:
            raise _refusal(exc) from None
        if self.on_hold is not None and ticket.hold is not None and not ticket.hold.duplicate:
            self.on_hold(caller.project_id)
        if chain.v06:
            signed = self.signer.paymaster_data_v06(draft, chain.chain_id, window)
        else:
            signed = self.signer.paymaster_data(
                draft, chain.chain_id, window, parallel=chain.parallel
            )
        if self.signatures is not None:
            final = replace(draft, paymaster_data=signed)
            await self.signatures.record(
                IssuedSignature(
                    caller.project_id,
                    chain.chain_id,
                    chain.entry_point,
                    _hash_of(final, chain),
                    final,
                    ticket.idempotency_key,
                    window.valid_until,
                    ask.at,
                )
            )
        return {**self._fields(chain, draft, signed), "sponsor": self._sponsor(ticket)}

    # ------------------------------------------------------------------ helpers

    def _request(
        self, params: list[Any], caller: PaymasterCaller
    ) -> tuple[PaymasterChain, UserOperation, str | None]:
        if len(params) < 3:
            raise invalid_params("expected [userOp, entryPoint, chainId, context?]")
        chain = self.chains.get(caller.chain_id)
        if chain is None:
            raise invalid_params(f"this paymaster does not serve chain {caller.chain_id}")
        if not isinstance(params[2], str):  # ERC-7677: a hex string; `true` is not chain 1
            raise invalid_params(f"chainId: expected a hex string, got {params[2]!r}")
        requested = parse_quantity(params[2], "chainId")
        if requested != caller.chain_id:
            raise BundlerError(
                RpcErrorCode.INVALID_PARAMS,
                f"chainId {hex(requested)} is not this endpoint's chain {hex(caller.chain_id)}",
                {"supportedChainIds": [hex(caller.chain_id)]},
            )
        entry_point = parse_address(params[1], "entryPoint")
        served = chain.at(entry_point)
        if served is None:
            raise BundlerError(
                RpcErrorCode.INVALID_PARAMS,
                f"unsupported entry point {entry_point}: this paymaster serves "
                + ", ".join(chain.entry_points),
                {"supportedEntryPoints": chain.entry_points},
            )
        chain = served
        context = params[3] if len(params) > 3 else None
        if context is not None and not isinstance(context, dict):
            raise invalid_params("context must be an object")
        policy_id = (context or {}).get("policyId")
        if policy_id is not None and not _printable_id(policy_id):
            raise invalid_params(
                f"context.policyId must be a printable string of at most {MAX_POLICY_ID} characters"
            )
        op = unsigned_op_v06(params[0]) if chain.v06 else _unsigned_op(params[0])
        return chain, op, policy_id

    def _with_gas(self, chain: PaymasterChain, op: UserOperation) -> UserOperation:
        """The op with this paymaster and its gas limits: the client's when it carries them
        for this paymaster (named, or no paymaster named yet: they are signed over, as it
        will send them), else ours. Limits above this paymaster's maximum are refused, never
        lowered: the client would sign over other limits than it asked for."""
        s = self.settings
        check_bounds(op, chain.limits)
        if chain.v06:  # its paymaster runs under the op's own verification gas
            return with_paymaster_v06(op, chain.paymaster)
        mine = op.paymaster is None or op.paymaster.lower() == chain.paymaster.lower()
        verification = op.paymaster_verification_gas_limit if mine else 0
        post_op = op.paymaster_post_op_gas_limit if mine else 0
        for name, value, most in (
            ("paymasterVerificationGasLimit", verification, s.max_verification_gas),
            ("paymasterPostOpGasLimit", post_op, s.max_post_op_gas),
        ):
            if value > most:
                raise invalid_params(f"{name} {value} is above this paymaster's maximum of {most}")
        return with_paymaster_gas(
            op,
            chain.paymaster,
            max(verification, paymaster_verification_gas(op, s.verification_gas)),
            max(post_op, s.post_op_gas),
        )

    async def _check(
        self, caller: PaymasterCaller, op: UserOperation, policy_id: str | None
    ) -> SponsorshipTicket:
        ask = SponsorshipAsk(caller.project_id, caller.chain_id, op, policy_id, self.clock())
        try:
            return await self.gate.check(ask)
        except SponsorshipRefusedError as exc:
            raise _refusal(exc) from None

    async def signing_time(self, chain: PaymasterChain) -> int:
        """The next block's time, as well as it can be told: the chain's latest block, or the
        service's clock when that block is older (a development node that mines only on
        transactions and sat idle would otherwise get signatures that expired at birth)."""
        return max(await chain.block_time(), int(self.clock().timestamp()))

    async def _window(self, chain: PaymasterChain, op: UserOperation) -> ValidityWindow:
        """A fresh window; on v0.9, the one the op already carries (from the stub data, which
        the account may have signed over) while it ends no later than a fresh one."""
        now = await self.signing_time(chain)
        fresh = self.settings.window(now)
        asked = _parallel_window(chain, op)
        if asked is not None and now < asked.valid_until <= fresh.valid_until:
            return asked
        return fresh

    @staticmethod
    def _fields(chain: PaymasterChain, op: UserOperation, data: bytes) -> dict[str, Any]:
        if chain.v06:
            return fields_v06(chain.paymaster, data)
        return {
            "paymaster": chain.paymaster,
            "paymasterData": to_hex(data),
            "paymasterVerificationGasLimit": hex(op.paymaster_verification_gas_limit),
            "paymasterPostOpGasLimit": hex(op.paymaster_post_op_gas_limit),
        }

    def _sponsor(self, ticket: SponsorshipTicket) -> dict[str, str]:
        info = ticket.sponsor or self.settings.sponsor
        return {"name": info.name} | ({"icon": info.icon} if info.icon else {})


def _as_charged(chain: PaymasterChain, op: UserOperation) -> UserOperation:
    return as_charged_v06(op) if chain.v06 else op


def _hash_of(op: UserOperation, chain: PaymasterChain) -> str | None:
    """The signed op's userOpHash; None for an EIP-7702 op whose delegate it does not name
    (its hash covers the delegate: the event is then matched by sender and nonce)."""
    if chain.v06:
        return "0x" + user_op_hash_v06(op.as_v06(), chain.entry_point, chain.chain_id).hex()
    delegate = op.eip7702_auth.address if op.eip7702_auth is not None else None
    if op.is_eip7702 and delegate is None:
        return None
    return "0x" + user_op_hash(op, chain.entry_point, chain.chain_id, delegate=delegate).hex()


def _parallel_window(chain: PaymasterChain, op: UserOperation) -> ValidityWindow | None:
    """The window in the signed part of a v0.9 op's data for this paymaster, if it has one."""
    if not chain.parallel or op.paymaster is None:
        return None
    if op.paymaster.lower() != chain.paymaster.lower():
        return None
    try:
        signed, _ = split_paymaster_signature(op.paymaster_and_data)
    except ValueError as exc:
        raise invalid_params(f"paymasterData: {exc}") from None
    window = signed[PAYMASTER_DATA_OFFSET:]
    if len(window) != 12:
        return None
    try:
        return ValidityWindow(int.from_bytes(window[:6]), int.from_bytes(window[6:]))
    except ValueError:
        return None


def _printable_id(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_POLICY_ID and not unprintable(value)


def _unsigned_op(raw: Any) -> UserOperation:
    """The op as ERC-7677 sends it: unsigned, its gas and fees possibly not filled in yet."""
    if not isinstance(raw, dict):
        raise invalid_params("userOp: expected an object")
    filled = {k: "0x0" for k in _UNSET_FIELDS} | {"signature": "0x"}
    filled |= {k: v for k, v in raw.items() if v is not None}
    op = parse_user_operation(filled)
    return replace(op, signature=b"")


def _refusal(exc: SponsorshipRefusedError) -> BundlerError:
    rule = exc.decision.rule
    code = (
        RpcErrorCode.INVALID_PARAMS
        if rule is Rule.POLICY_UNKNOWN
        else RpcErrorCode.REJECTED_BY_PAYMASTER
    )
    message = f"sponsorship refused ({rule.value if rule else 'policy'}): {exc.decision.message}"
    data = {"rule": rule.value if rule else None, "policyId": exc.policy_id}
    return BundlerError(code, message, data)
