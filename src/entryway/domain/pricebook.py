"""The price book: operations to credits, after requirements §8.3. Pure; every value is
configuration, the defaults below are documented in docs/pricing.md.

A quote is fixed service fees for what the service does off chain, plus the on-chain cost
converted at the plans' own rate (1 EUR per million credits: one credit per micro-euro)
with the network's configured native-token price. The requirements' four cost drivers map to:
operation complexity (calls, calldata), network conditions (the actual gas cost, L2 fees
included), data volume (notarized bytes, ops in a batch), verification steps (signatures,
guardian confirmations).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from entryway.domain.plans import MICRO_EUR_PER_CREDIT

WEI_PER_TOKEN = 10**18
KIB = 1024


class OperationType(StrEnum):
    READ = "read"
    SPONSORED_USER_OPERATION = "sponsored_user_operation"
    RELAYED_USER_OPERATION = "relayed_user_operation"  # the sender pays the gas
    ACCOUNT_CREATION = "account_creation"
    GUARDIAN_MANAGEMENT = "guardian_management"
    RECOVERY = "recovery"
    NOTARIZATION = "notarization"
    WEBHOOK_DELIVERY = "webhook_delivery"


@dataclass(frozen=True, slots=True)
class Quote:
    operation: OperationType
    credits: int
    breakdown: tuple[tuple[str, int], ...]  # (component, credits), summing to `credits`
    # Figures already inside the components, shown but not charged again: on OP-stack chains
    # the L1 data fee the gas paid for ("l1_fee_wei", "l1_fee_credits").
    included: tuple[tuple[str, int], ...] = ()

    @classmethod
    def of(cls, operation: OperationType, **parts: int) -> Quote:
        return cls(operation, sum(parts.values()), tuple(parts.items()))


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True, slots=True)
class PriceBook:
    # Micro-euros per whole native token (POL, ETH), by chain id.
    native_token_micro_eur: Mapping[int, int]
    read: int = 0
    validation: int = 100  # simulating and tracing an op
    sponsorship: int = 100  # signing and policy checks
    relay_per_call: int = 200  # bundling, sending, following one call
    per_calldata_byte: int = 1
    account_creation: int = 1_000
    guardian_change: int = 500
    per_verification_step: int = 250  # one signature or guardian confirmation checked
    recovery: int = 2_000
    notarization: int = 500
    notarization_per_kib: int = 10  # the data size factor
    webhook_delivery: int = 10
    extra: Mapping[str, int] = field(default_factory=dict)

    def gas_credits(self, chain_id: int, gas_cost_wei: int) -> int:
        """On-chain cost in credits at the network's token price, rounded up."""
        price = self.native_token_micro_eur[chain_id]
        micro_eur = _ceil_div(gas_cost_wei * price, WEI_PER_TOKEN)
        return _ceil_div(micro_eur, MICRO_EUR_PER_CREDIT)

    def read_query(self) -> Quote:
        return Quote.of(OperationType.READ, service=self.read)

    def sponsored_user_operation(
        self, chain_id: int, *, calls: int, calldata_bytes: int, gas_cost_wei: int
    ) -> Quote:
        """Validation + sponsorship + relay; a batch of `calls` costs the sum of its calls."""
        return Quote.of(
            OperationType.SPONSORED_USER_OPERATION,
            validation=self.validation,
            sponsorship=self.sponsorship + self.gas_credits(chain_id, gas_cost_wei),
            relay=self.relay_per_call * max(calls, 1) + self.per_calldata_byte * calldata_bytes,
        )

    def relayed_user_operation(self, *, calls: int, calldata_bytes: int, sponsored: bool) -> Quote:
        """An op the bundler relays for a sender who pays its own gas: validation + relay.
        Ops our paymaster sponsors were charged at sponsorship, so relaying them is free."""
        if sponsored:
            return Quote.of(OperationType.RELAYED_USER_OPERATION, sponsored=0)
        return Quote.of(
            OperationType.RELAYED_USER_OPERATION,
            validation=self.validation,
            relay=self.relay_per_call * max(calls, 1) + self.per_calldata_byte * calldata_bytes,
        )

    def account_creation_quote(self, chain_id: int, gas_cost_wei: int) -> Quote:
        return Quote.of(
            OperationType.ACCOUNT_CREATION,
            deployment=self.account_creation,
            gas=self.gas_credits(chain_id, gas_cost_wei),
        )

    def guardian_management(
        self, chain_id: int, *, verification_steps: int, gas_cost_wei: int
    ) -> Quote:
        return Quote.of(
            OperationType.GUARDIAN_MANAGEMENT,
            service=self.guardian_change,
            verification=self.per_verification_step * verification_steps,
            gas=self.gas_credits(chain_id, gas_cost_wei),
        )

    def recovery_quote(
        self, chain_id: int, *, guardian_confirmations: int, gas_cost_wei: int
    ) -> Quote:
        return Quote.of(
            OperationType.RECOVERY,
            service=self.recovery,
            verification=self.per_verification_step * guardian_confirmations,
            gas=self.gas_credits(chain_id, gas_cost_wei),
        )

    def notarization_quote(self, *, data_bytes: int, verification_steps: int) -> Quote:
        """The notarization cost + (data size factor x verification steps); a hash is one KiB
        at least, so anchoring a bare hash still counts its one step."""
        size_factor = self.notarization_per_kib * max(_ceil_div(data_bytes, KIB), 1)
        return Quote.of(
            OperationType.NOTARIZATION,
            service=self.notarization,
            data=size_factor * max(verification_steps, 1),
        )

    def webhook(self) -> Quote:
        return Quote.of(OperationType.WEBHOOK_DELIVERY, delivery=self.webhook_delivery)


# Token prices for the defaults: POL 0.20 EUR, ETH 3,000 EUR (micro-euros per token).
DEFAULT_NATIVE_PRICES: dict[int, int] = {
    137: 200_000,
    80002: 200_000,
    8453: 3_000_000_000,
    84532: 3_000_000_000,
}


def default_price_book() -> PriceBook:
    return PriceBook(native_token_micro_eur=DEFAULT_NATIVE_PRICES)
