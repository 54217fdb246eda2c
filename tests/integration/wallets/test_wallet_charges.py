"""Wallet operations priced through the paymaster on anvil: an op that deploys an account and
sets its guardians, a recovery started by guardians' approvals, and an owner's cancellation
are held at signing (pm_getPaymasterData) with their wallet charges, mined by the bundler and
settled from the receipt by the settler: the same wallet charges, the gas now the actual one,
every total the exact sum of its parts."""

from __future__ import annotations

from typing import Any

from entryway.bundler.port import InProcessBundler
from entryway.bundler.rpc_methods import BundlerRpc
from entryway.bundler.rpc_types import user_operation_json
from entryway.domain.pricebook import default_price_book
from entryway.domain.signatures import recovery_digest, sign_digest, sort_approvals
from entryway.domain.userop import UserOperation
from entryway.paymaster.calls import call_count, decode_calls
from entryway.paymaster.costs import max_gas_cost_wei, sponsorship_key
from entryway.paymaster.erc7677 import PaymasterCaller, PaymasterChain, PaymasterRpc
from entryway.paymaster.memory import HeldSponsorship, InMemorySponsorships
from entryway.paymaster.settlement import SponsoredOp, SponsorshipSettler
from entryway.paymaster.signer import PaymasterSigner
from tests.integration.conftest import CHAIN_ID
from tests.integration.harness import ACCOUNT, Harness, self_call
from tests.integration.wallets.conftest import guarded_op, receipt_of

PRICES = default_price_book()
PROJECT = "wallet-charges"


class Sponsor:
    """The paymaster and the settler as the service runs them, over an in-memory ledger."""

    def __init__(self, h: Harness, bundler: BundlerRpc) -> None:
        self.h, self.bundler = h, bundler
        self.book = InMemorySponsorships()
        d = h.deployment
        chain = PaymasterChain.on(h.eth, CHAIN_ID, d.entry_point, d.paymaster)
        self.pm = PaymasterRpc(
            {CHAIN_ID: chain},
            PaymasterSigner(h.paymaster_signer),
            self.book,
            self.book,
            self.book,
            PRICES,
        )

        port = InProcessBundler(bundler.bundler, bundler.estimator)
        self.settler = SponsorshipSettler(self.book, PRICES, {CHAIN_ID: port})

    async def run(self, draft: UserOperation, signer: Any | None) -> tuple[HeldSponsorship, ...]:
        """Sponsor (hold), sign, send, mine and settle `draft`: (the hold, the settlement)."""
        raw = user_operation_json(draft)
        del raw["signature"]
        params = [raw, self.h.deployment.entry_point, hex(CHAIN_ID), {}]
        final = await self.pm.dispatch(
            "pm_getPaymasterData", params, PaymasterCaller(PROJECT, "k", CHAIN_ID)
        )
        op = draft.with_paymaster(
            final["paymaster"],
            int(final["paymasterVerificationGasLimit"], 16),
            int(final["paymasterPostOpGasLimit"], 16),
            bytes.fromhex(final["paymasterData"][2:]),
        )
        op = self.h.sign(op, signer) if signer is not None else op
        held = self.book.events[PROJECT, sponsorship_key(CHAIN_ID, op)]
        op_hash = await self.bundler.send_user_operation(
            [user_operation_json(op), self.h.deployment.entry_point]
        )
        receipt = await receipt_of(self.bundler, op_hash)
        assert receipt["success"] is True, receipt
        sponsored = SponsoredOp(PROJECT, CHAIN_ID, op_hash, op, 2**48 - 1)
        assert await self.settler.check(sponsored)
        settled = self.book.events[PROJECT, sponsorship_key(CHAIN_ID, op)]
        assert settled.status == "settled"
        base = PRICES.sponsored_user_operation(
            CHAIN_ID,
            calls=call_count(decode_calls(op.call_data)),
            calldata_bytes=len(op.call_data),
            gas_cost_wei=int(receipt["actualGasCost"], 16),
        )
        wallet = {k: v for k, v in settled.quote.breakdown if k not in dict(base.breakdown)}
        # Settled = the plain sponsorship at the actual gas cost + the wallet charges, exactly.
        assert settled.credits == base.credits + sum(wallet.values())
        assert settled.credits == sum(c for _, c in settled.quote.breakdown)
        held_at_max = PRICES.sponsored_user_operation(
            CHAIN_ID,
            calls=call_count(decode_calls(op.call_data)),
            calldata_bytes=len(op.call_data),
            gas_cost_wei=max_gas_cost_wei(op),
        )
        assert held.credits == held_at_max.credits + sum(wallet.values())
        assert settled.credits < held.credits
        return held, settled


def wallet_charges(event: HeldSponsorship) -> dict[str, int]:
    kinds = ("account_creation", "guardian_management", "recovery")
    return {k: v for k, v in event.quote.breakdown if k in kinds}


async def test_deploying_guarding_recovering_and_cancelling_are_charged_as_such(
    harness: Harness, auto_bundler: BundlerRpc
) -> None:
    sponsor = Sponsor(harness, auto_bundler)
    owner, g1, g2 = harness.new_key(), harness.new_key(), harness.new_key()

    # Deployed with two guardians and threshold 2: creation + three owner-signed changes.
    held, settled = await sponsor.run(await guarded_op(harness, owner, [g1, g2], 2), owner)
    account = held.subject
    assert account is not None
    expected = {"account_creation": 1_000, "guardian_management": 3 * (500 + 250)}
    assert wallet_charges(held) == wallet_charges(settled) == expected
    assert await harness.call(account, ACCOUNT, "guardianThreshold") == 2

    # A recovery started by both guardians' approvals, no owner signature: two confirmations.
    new_owner = harness.new_key()
    digest = recovery_digest(account, new_owner.address, 0, CHAIN_ID)
    approvals = sort_approvals({g.address: sign_digest(bytes(g.key), digest) for g in (g1, g2)})
    start = ACCOUNT.encode_call("startRecovery", new_owner.address, approvals)
    draft = await harness.build_op(owner.address, start, sender=account)
    held, settled = await sponsor.run(draft, None)
    assert wallet_charges(held) == wallet_charges(settled) == {"recovery": 2_000 + 2 * 250}
    pending_owner, _ = await harness.call(account, ACCOUNT, "pendingRecovery")
    assert pending_owner == new_owner.address

    # The owner cancels it through execute(self, cancelRecovery()): a recovery step.
    cancel = self_call(account, ACCOUNT.encode_call("cancelRecovery"))
    draft = await harness.build_op(owner.address, cancel, sender=account)
    held, settled = await sponsor.run(draft, owner)
    assert wallet_charges(held) == wallet_charges(settled) == {"recovery": 2_000}
    assert await harness.call(account, ACCOUNT, "recoveryNonce") == 1

    # An ordinary op of the same account pays no wallet charge.
    draft = await harness.build_op(owner.address, b"", sender=account)
    held, settled = await sponsor.run(draft, owner)
    assert wallet_charges(held) == wallet_charges(settled) == {}
    assert all(e.status == "settled" for e in sponsor.book.events.values())
