"""What a chain's node serves of what Entryway relies on, found by asking it.

The bundler was built on anvil, which serves everything; a hosted provider or a public
endpoint may not. Some gaps stop the service (with no state overrides on `eth_call`, no
op can be simulated: the bundler's validation and gas estimation run the EntryPoint's
simulation code in place of the deployed one), others only cost something (no batches:
one round trip per call) or have a fallback the node client takes by itself (no `safe` or
`finalized` tag: a confirmation depth; no `eth_feeHistory`: tips from `eth_gasPrice`).

`probe_capabilities` asks a handful of cheap calls, changes nothing on the chain, and
returns one line per feature for a start-up log or a configuration check. Probing the
batch and log-range caps teaches the client those caps as a side effect
(`chain.limits`). The debug namespace and its tracers are probed elsewhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from entryway.chain.limits import is_range_refusal
from entryway.chain.rpc import EthClient, RpcError
from entryway.domain.evm import to_hex

# An address nothing is deployed at, given code that returns this word: an answer of the
# word proves the node ran the overriding code.
PROBE_ADDRESS = "0x00000000000000000000000000000000E47e7e01"
PROBE_WORD = bytes.fromhex("e47e7e01" * 8)
# PUSH32 word, PUSH1 0, MSTORE, PUSH1 32, PUSH1 0, RETURN
PROBE_CODE = b"\x7f" + PROBE_WORD + bytes.fromhex("60005260206000f3")
PROBE_BATCH = 20  # calls in the batch probe: more than the smallest hosted caps
PROBE_LOG_BLOCKS = 10_000  # the receipts' default lookback


@dataclass(frozen=True, slots=True)
class NodeCapabilities:
    state_overrides: bool
    safe_tag: bool
    finalized_tag: bool
    fee_history: bool
    batch_cap: int | None  # calls per batch the node took at most; None: no cap met
    # Blocks per eth_getLogs; None: no refusal over the latest PROBE_LOG_BLOCKS blocks (or
    # the whole chain, when it is shorter).
    log_range: int | None

    @property
    def simulates(self) -> bool:
        """Whether the bundler can run against this node at all."""
        return self.state_overrides

    def lines(self) -> list[str]:
        """One line per feature: what the node serves, and what a gap means here."""
        return [
            "state overrides on eth_call: "
            + (
                "yes"
                if self.state_overrides
                else "no: simulations cannot run on this node, so neither can the bundler "
                "(validation and gas estimation run ops with overridden code); use a node "
                "or provider that serves eth_call state overrides"
            ),
            '"safe" block tag: '
            + ("yes" if self.safe_tag else "no: a confirmation depth stands in for it"),
            '"finalized" block tag: '
            + ("yes" if self.finalized_tag else "no: a confirmation depth stands in for it"),
            "eth_feeHistory: "
            + (
                "yes"
                if self.fee_history
                else "no: tips come from eth_maxPriorityFeePerGas or eth_gasPrice, and "
                "wallets that estimate fees from eth_feeHistory through this node fail"
            ),
            "JSON-RPC batches: " + _batches(self.batch_cap),
            "eth_getLogs range: "
            + (
                f"no cap met over the latest {PROBE_LOG_BLOCKS} blocks"
                if self.log_range is None
                else f"at most {self.log_range} blocks a query: longer searches are paged"
            ),
        ]

    def describe(self) -> str:
        return "\n".join(self.lines())


def _batches(cap: int | None) -> str:
    if cap is None:
        return f"yes ({PROBE_BATCH} calls in one taken)"
    if cap == 1:
        return "no: calls are sent one by one (slower)"
    return f"yes, at most {cap} calls a batch: larger ones are split"


async def probe_capabilities(eth: EthClient) -> NodeCapabilities:
    """The node's capabilities, asked of it (about ten cheap reads)."""
    return NodeCapabilities(
        state_overrides=await _state_overrides(eth),
        safe_tag=await _serves(eth, "eth_getBlockByNumber", ["safe", False]),
        finalized_tag=await _serves(eth, "eth_getBlockByNumber", ["finalized", False]),
        fee_history=await _serves(eth, "eth_feeHistory", ["0x1", "latest", [50]]),
        batch_cap=await _batch_cap(eth),
        log_range=await _log_range(eth),
    )


async def _state_overrides(eth: EthClient) -> bool:
    """Whether eth_call ran code given as an override (a node that ignores the override
    answers empty; one that refuses it, an error)."""
    try:
        answer = await eth.call(
            PROBE_ADDRESS, b"", state_override={PROBE_ADDRESS: {"code": to_hex(PROBE_CODE)}}
        )
    except RpcError:
        return False
    return answer == PROBE_WORD


async def _serves(eth: EthClient, method: str, params: list[object]) -> bool:
    try:
        return await eth.rpc.request(method, params) is not None
    except RpcError:
        return False


async def _batch_cap(eth: EthClient) -> int | None:
    """The client's batch cap once a batch of PROBE_BATCH reads went through (the client
    splits and learns on a refusal)."""
    calls: list[tuple[str, list[object]]] = [("eth_chainId", [])] * PROBE_BATCH
    await eth.rpc.batch_outcomes(calls)
    return eth.rpc.batch_cap.limit


async def _log_range(eth: EthClient) -> int | None:
    """The widest recent range (up to PROBE_LOG_BLOCKS) the node searched in one query,
    halving from there at each refusal; None when it took the whole of it."""
    head = await eth.block_number()
    blocks = PROBE_LOG_BLOCKS
    while True:
        query = {"address": PROBE_ADDRESS, "fromBlock": hex(max(head - blocks + 1, 0))}
        try:
            await eth.rpc.request("eth_getLogs", [{**query, "toBlock": hex(head)}])
        except RpcError as error:
            if blocks == 1 or not is_range_refusal(error.message):
                raise
            blocks = eth.rpc.log_range.refused(blocks, error.message)
            continue
        return None if blocks == PROBE_LOG_BLOCKS else blocks
