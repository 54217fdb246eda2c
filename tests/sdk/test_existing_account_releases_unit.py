"""What `client.account` does by EntryPoint release, without a chain: which EntryPoint
`entry_point_version` picks, each release's SimpleAccount call data (against the npm
artifacts' ABIs) and signing rule, and a v0.6 op sponsored over a fake service: the ERC-7677
answers in v0.6's shape (`paymasterAndData`) go into the op, sent in v0.6's form, and the
account's callback signs v0.6's userOpHash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from entryway_sdk import (
    ENTRY_POINT_V06,
    ENTRY_POINT_V07,
    ENTRY_POINT_V08,
    ENTRY_POINT_V09,
    Call,
    EntryPointVersion,
    Entryway,
    direct_sign,
    simple_account_call_data,
    simple_account_encoder,
    simple_account_signer,
)
from entryway_sdk.userop import ENTRY_POINT_V09_DEVNET
from eth_account import Account
from eth_utils.address import to_checksum_address

from entryway import contracts
from entryway.domain.signatures import eth_signed_message_digest
from entryway.domain.userop_v06 import op_v06_from_json, user_op_hash_v06
from tests.sdk.fakes import API, DEFAULTS, FAST, NODE
from tests.sdk.test_existing_account import ACCOUNT, PAYMASTER, Callback, Chain

ARTIFACTS: dict[EntryPointVersion, str] = {
    "0.6": "SimpleAccountV06",
    "0.7": "SimpleAccountV07",
    "0.8": "SimpleAccount",
    "0.9": "SimpleAccountV09",
}
A, B = Account.create().address, Account.create().address


# ---------------------------------------------------------------- call data


@pytest.mark.parametrize("version", ["0.6", "0.7", "0.8", "0.9"])
def test_one_call_is_execute_in_every_release(version: EntryPointVersion) -> None:
    abi = contracts.load(ARTIFACTS[version]).abi
    data = simple_account_call_data([Call(A, 5, b"\x01")], version)
    assert data == abi.encode_call("execute", A, 5, b"\x01")
    assert simple_account_encoder(version)([Call(A, 5, b"\x01")]) == data


def test_a_batch_is_each_releases_execute_batch() -> None:
    calls = [Call(A, 0, b"\x01"), Call(B, 0, b"")]
    v06 = contracts.load("SimpleAccountV06").abi
    assert simple_account_call_data(calls, "0.6") == v06.encode_call(
        "executeBatch", [A, B], [b"\x01", b""]
    )
    valued = [Call(A, 3, b""), Call(B, 4, b"\x02")]
    v07 = contracts.load("SimpleAccountV07").abi
    assert simple_account_call_data(valued, "0.7") == v07.encode_call(
        "executeBatch", [A, B], [3, 4], [b"", b"\x02"]
    )
    for version in ("0.8", "0.9"):
        abi = contracts.load(ARTIFACTS[version]).abi  # type: ignore[index]
        assert simple_account_call_data(valued, version) == abi.encode_call(  # type: ignore[arg-type]
            "executeBatch", [(A, 3, b""), (B, 4, b"\x02")]
        )


def test_v06_refuses_a_batch_carrying_value() -> None:
    with pytest.raises(ValueError, match="without value"):
        simple_account_call_data([Call(A, 1, b""), Call(B, 0, b"")], "0.6")


# ---------------------------------------------------------------- signing


async def test_each_releases_simple_account_signs_by_its_rule() -> None:
    owner = Account.create()
    digest = bytes(range(32))
    for version in ("0.6", "0.7"):
        signature = await simple_account_signer(owner, version)(digest)  # type: ignore[arg-type, misc]
        assert Account._recover_hash(eth_signed_message_digest(digest), signature=signature) == (
            owner.address
        )
    for version in ("0.8", "0.9"):
        signature = await simple_account_signer(owner, version)(digest)  # type: ignore[arg-type, misc]
        assert Account._recover_hash(digest, signature=signature) == owner.address
        assert signature == await direct_sign(owner)(digest)  # type: ignore[misc]
    with pytest.raises(ValueError, match="unsupported EntryPoint version"):
        simple_account_signer(owner, "1.0")  # type: ignore[arg-type]


# ---------------------------------------------------------------- the EntryPoint picked


class V06Chain(Chain):
    """The fake chain, its bundler and paymaster speaking v0.6: ops in v0.6's form, the
    paymaster's answers as one `paymasterAndData`."""

    def __init__(self) -> None:
        super().__init__()
        for method, data in (
            ("pm_getPaymasterStubData", "00" * 20),
            ("pm_getPaymasterData", "ab" * 20),
        ):
            joined = {"paymasterAndData": PAYMASTER.lower() + data}
            self.fake.routes[method] = self._answer(joined)
        self.fake.routes["eth_sendUserOperation"] = self._send_v06

    def _send_v06(self, request: httpx.Request) -> httpx.Response:
        raw, entry_point = json.loads(request.content)["params"]
        self.sent = raw
        digest = user_op_hash_v06(op_v06_from_json(raw), entry_point, 80002)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": "0x" + digest.hex()})


@pytest.fixture
def chain() -> V06Chain:
    return V06Chain()


@pytest.fixture
async def http(chain: V06Chain) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(transport=httpx.MockTransport(chain.handle)) as http:
        yield http


async def _client(chain: Chain, http: httpx.AsyncClient, defaults: dict[str, Any]) -> Entryway:
    chain.fake.routes["/get-sdk-defaults"] = lambda _: httpx.Response(200, json=defaults)
    return await Entryway.init(
        api_key="ew_test_key", rpc_url=NODE, chain_id=80002, base_url=API, http=http, retry=FAST
    )


@pytest.fixture
async def client(chain: V06Chain, http: httpx.AsyncClient) -> Entryway:
    return await _client(chain, http, DEFAULTS)


async def test_the_release_picks_the_chains_entry_point(
    chain: V06Chain, http: httpx.AsyncClient
) -> None:
    v06_elsewhere = to_checksum_address("0x" + "66" * 20)  # a private chain's, say
    devnet = DEFAULTS | {
        "entryPointV06": v06_elsewhere,
        "entryPointV07": ENTRY_POINT_V07,
        "entryPointV09": ENTRY_POINT_V09_DEVNET,
    }
    client = await _client(chain, http, devnet)
    assert client.defaults.entry_point_v06 == v06_elsewhere
    sign = Callback()
    picked = {
        version: client.account(ACCOUNT, signer=sign, entry_point_version=version)
        for version in ("0.6", "0.7", "0.8", "0.9")
    }
    assert {v: (a.entry_point, a.entry_point_version) for v, a in picked.items()} == {
        "0.6": (v06_elsewhere, "0.6"),
        "0.7": (ENTRY_POINT_V07, "0.7"),
        "0.8": (to_checksum_address(DEFAULTS["entryPoint"]), "0.8"),
        "0.9": (ENTRY_POINT_V09_DEVNET, "0.9"),
    }
    assert client.account(ACCOUNT, signer=sign).entry_point == ENTRY_POINT_V07  # the default
    # a chain whose defaults name none: the release's canonical EntryPoint
    bare = await _client(chain, http, DEFAULTS)
    assert bare.account(ACCOUNT, signer=sign, entry_point_version="0.6").entry_point == (
        ENTRY_POINT_V06
    )
    assert bare.account(ACCOUNT, signer=sign, entry_point_version="0.9").entry_point == (
        ENTRY_POINT_V09
    )
    assert bare.account(ACCOUNT, signer=sign, entry_point_version="0.8").entry_point == (
        ENTRY_POINT_V08
    )
    with pytest.raises(ValueError, match="unsupported EntryPoint version"):
        bare.account(ACCOUNT, signer=sign, entry_point_version="1.0")  # type: ignore[arg-type]


async def test_a_sponsored_v06_op_takes_paymaster_and_data_from_erc7677(
    client: Entryway, chain: V06Chain
) -> None:
    sign = Callback()
    account = client.account(ACCOUNT, signer=sign, entry_point=ENTRY_POINT_V06)

    pending = await account.send([{"to": A, "data": b"gm"}, {"to": B}])

    for method in ("pm_getPaymasterStubData", "pm_getPaymasterData", "eth_sendUserOperation"):
        assert ENTRY_POINT_V06 in chain.params(method)
    # every request carried the op in v0.6's form; estimation saw the stub's paymasterAndData
    stub_request = chain.params("pm_getPaymasterStubData")[0]
    estimated = chain.params("eth_estimateUserOperationGas")[0]
    for op in (stub_request, estimated):
        assert "initCode" in op and "factory" not in op and "paymaster" not in op
    assert stub_request["paymasterAndData"] == "0x"
    assert estimated["paymasterAndData"] == PAYMASTER.lower() + "00" * 20
    sent = op_v06_from_json(chain.sent)
    assert set(chain.sent) == {
        "sender",
        "nonce",
        "initCode",
        "callData",
        "callGasLimit",
        "verificationGasLimit",
        "preVerificationGas",
        "maxFeePerGas",
        "maxPriorityFeePerGas",
        "paymasterAndData",
        "signature",
    }
    assert sent.paymaster_and_data == bytes.fromhex(PAYMASTER[2:]) + b"\xab" * 20
    assert sent.call_data == contracts.load("SimpleAccountV06").abi.encode_call(
        "executeBatch", [A, B], [b"gm", b""]
    )
    assert (sent.call_gas_limit, sent.verification_gas_limit) == (70_000, 90_000)
    v06_hash = user_op_hash_v06(sent, ENTRY_POINT_V06, 80002)
    assert sign.hashes == [v06_hash] and sent.signature == b"\x01" + v06_hash
    assert pending.user_op_hash == "0x" + v06_hash.hex()
