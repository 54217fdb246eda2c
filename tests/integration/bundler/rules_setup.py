"""Deploys the test contracts that break ERC-7562 rules on demand (contracts/test/TestRules.sol)
and builds ops whose account, paymaster or factory breaks a named rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eth_abi.abi import encode

from entryway import contracts
from entryway.contracts.abi import abi_type
from entryway.domain.userop import UserOperation
from tests.integration.harness import ETHER, Harness

PAYMASTER = contracts.load("TestRulesPaymaster").abi
FACTORY = contracts.load("TestRulesFactory").abi
ONE_DAY = 86_400


async def deploy(h: Harness, name: str, *args: Any) -> str:
    artifact = contracts.load(name)
    constructor = next((i for i in artifact.raw_abi if i["type"] == "constructor"), None)
    types = [abi_type(p) for p in constructor["inputs"]] if constructor else []
    receipt = await h.executor.send(None, artifact.bytecode + encode(types, list(args)))
    assert receipt.contract_address is not None
    return receipt.contract_address


@dataclass
class RuleContracts:
    h: Harness
    store: str
    helper: str
    paymaster: str
    staked_paymaster: str
    factory: str
    staked_factory: str
    salt: int = 0

    async def account(self) -> str:
        """A deployed account whose validation breaks the rule in its signature."""
        ep = self.h.deployment.entry_point
        address = await deploy(self.h, "TestRulesAccount", ep, self.store, self.helper)
        await self.h.fund(address, 10 * ETHER)
        return address

    async def op(self, sender: str, signature: bytes = b"", **fields: Any) -> UserOperation:
        max_fee, priority = await self.h.fees()
        base = {
            "sender": sender,
            "nonce": 0,
            "call_data": b"",
            "call_gas_limit": 50_000,
            "verification_gas_limit": 1_000_000,
            "pre_verification_gas": 100_000,
            "max_fee_per_gas": max_fee,
            "max_priority_fee_per_gas": priority,
            "signature": signature,
        }
        base.update(fields)
        return UserOperation(**base)

    async def account_op(self, rule: str) -> UserOperation:
        return await self.op(await self.account(), rule.encode())

    async def paymaster_op(self, rule: str, *, staked: bool = False) -> UserOperation:
        paymaster = self.staked_paymaster if staked else self.paymaster
        op = await self.op(await self.account())
        return op.with_paymaster(paymaster, 1_000_000, 0, rule.encode())

    async def factory_op(self, rule: str, *, staked: bool = False) -> UserOperation:
        factory = self.staked_factory if staked else self.factory
        self.salt += 1
        salt = self.salt.to_bytes(32, "big")
        sender = await self.h.call(factory, FACTORY, "getAddress", salt)
        await self.h.fund(sender, 10 * ETHER)
        # Deploying the rule account's code costs over a million gas.
        return await self.op(
            sender,
            factory=factory,
            factory_data=FACTORY.encode_call("createAccount", salt, rule),
            verification_gas_limit=4_000_000,
        )


async def deploy_rule_contracts(h: Harness) -> RuleContracts:
    # Each module deploying these funds their deposits and stakes from the session's one
    # executor: topped up first, so the modules a worker runs never drain it.
    await h.eth.rpc.request("anvil_setBalance", [h.executor.address, hex(1000 * ETHER)])
    ep = h.deployment.entry_point
    store = await deploy(h, "TestStorage")
    helper = await deploy(h, "RuleHelper", ep, store)
    paymasters, factories = [], []
    for staked in (False, True):
        pm = await deploy(h, "TestRulesPaymaster", ep, store, helper)
        await h.executor.send(pm, PAYMASTER.encode_call("deposit"), value=100 * ETHER)
        factory = await deploy(h, "TestRulesFactory", ep, store, helper)
        if staked:
            await h.executor.send(pm, PAYMASTER.encode_call("addStake", ONE_DAY), value=ETHER)
            await h.executor.send(factory, FACTORY.encode_call("addStake", ONE_DAY), value=ETHER)
        paymasters.append(pm)
        factories.append(factory)
    return RuleContracts(h, store, helper, paymasters[0], paymasters[1], factories[0], factories[1])
