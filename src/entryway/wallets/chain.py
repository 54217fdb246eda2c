"""Reading Entryway smart accounts and their factory on chain (implements
`wallets.ports.AccountChain` over the service's per-chain clients)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eth_abi.exceptions import DecodingError

from entryway.chain.logs import contract_logs
from entryway.chain.rpc import EthClient, RpcError
from entryway.deploy.deployer import Deployment
from entryway.domain.evm import checksum, hex_to_bytes
from entryway.wallets.account_info import ACCOUNT, FACTORY, read_account
from entryway.wallets.ports import NotASmartAccountError
from entryway.wallets.recovery import ChainRecovery


async def counterfactual_address(eth: EthClient, factory: str, owner: str, salt: int) -> str:
    """AccountFactory.getAddress(owner, salt): where the account is (or will be) deployed."""
    raw = await eth.call(factory, FACTORY.encode_call("getAddress", checksum(owner), salt))
    return checksum(str(FACTORY.decode_output("getAddress", raw)[0]))


async def _read(eth: EthClient, account: str, fn: str, *args: Any) -> tuple[Any, ...]:
    return ACCOUNT.decode_output(fn, await eth.call(account, ACCOUNT.encode_call(fn, *args)))


class SmartAccountChain:
    """`AccountChain` over one EthClient and deployment per chain id."""

    def __init__(self, chains: Mapping[int, tuple[EthClient, Deployment]]) -> None:
        self.chains = chains

    def _eth(self, chain_id: int) -> EthClient:
        return self.chains[chain_id][0]

    async def recovery(self, chain_id: int, account: str) -> ChainRecovery:
        eth = self._eth(chain_id)
        if not await eth.get_code(account):
            raise NotASmartAccountError(f"no account is deployed at {account} on chain {chain_id}")
        try:
            (owner,) = await _read(eth, account, "owner")
            (nonce,) = await _read(eth, account, "recoveryNonce")
            new_owner, execute_after = await _read(eth, account, "pendingRecovery")
        except (RpcError, DecodingError, ValueError):
            raise NotASmartAccountError(
                f"{account} on chain {chain_id} is not an Entryway smart account"
            ) from None
        pending = checksum(str(new_owner)) if int(execute_after) else None
        return ChainRecovery(checksum(str(owner)), int(nonce), pending, int(execute_after))

    async def guardians(self, chain_id: int, account: str) -> tuple[tuple[str, ...], int]:
        eth, deployment = self.chains[chain_id]
        info = await read_account(eth, deployment, account)
        return info.guardians, info.threshold

    async def is_guardian(self, chain_id: int, account: str, guardian: str) -> bool:
        (answer,) = await _read(self._eth(chain_id), account, "isGuardian", checksum(guardian))
        return bool(answer)

    async def block_time(self, chain_id: int) -> int:
        return int((await self._eth(chain_id).get_block("latest"))["timestamp"], 16)

    async def cancellation_tx(self, chain_id: int, account: str, recovery_nonce: int) -> str | None:
        topic = "0x" + ACCOUNT.event_topic("RecoveryCancelled").hex()
        logs = await contract_logs(self._eth(chain_id), {"address": account, "topics": [topic]})
        for log in logs:
            if int.from_bytes(hex_to_bytes(str(log["data"]))[:32], "big") == recovery_nonce:
                return str(log["transactionHash"])
        return None
