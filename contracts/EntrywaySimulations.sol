// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {EntryPointSimulations} from "@account-abstraction/contracts/core/EntryPointSimulations.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";

/// @title Simulation code for gas estimation and validation tracing (never deployed)
/// @notice The bundler runs this at the EntryPoint's address through a state override. On top
/// of the release's EntryPointSimulations it finds, in one eth_call, the least call gas with
/// which an op's execution succeeds: it validates the op as handleOps would (deploying the
/// account, consuming the nonce), then bisects over calls whose effects are rolled back.
/// It also replays an op's validation calls to its entities with nothing else around them,
/// for the bundler's ERC-7562 trace (`traceValidation`).
contract EntrywaySimulations is EntryPointSimulations {
    error CallResult(bool success, uint256 gasUsed, bytes result);

    // traceValidation's arguments follow its selector as raw words, not as ABI-encoded
    // parameters: decoding a struct of byte strings costs hundreds of traced steps.
    uint256 private constant NO_PATCH = type(uint256).max;
    // validateUserOp(op, userOpHash, missingAccountFunds): selector, op offset, hash, then it
    uint256 private constant MISSING_FUNDS_OFFSET = 4 + 32 + 32;

    /// @notice Makes the entities' validation calls as the EntryPoint does (same order,
    /// calldata and gas limits; missingAccountFunds from the sender's deposit once deployed)
    /// and nothing more. The EntryPoint's own bookkeeping, which ERC-7562 does not judge, is
    /// most of a traced `simulateValidation`; the bundler traces this instead and takes the
    /// op's result from an untraced `simulateValidation`.
    /// @dev After the selector, nine words: sender, SenderCreator, paymaster (zero if none),
    /// verificationGasLimit, paymasterVerificationGasLimit, requiredPrefund, then the lengths
    /// of the factory call (createSender(initCode); 0 when the sender exists), the account
    /// call (validateUserOp(op, userOpHash, 0); missingAccountFunds is set here) and the
    /// paymaster call (validatePaymasterUserOp(op, userOpHash, requiredPrefund)); then the
    /// three calls' bytes, back to back.
    /// @return phasesRun how many calls succeeded, in order; it stops at the first failure
    function traceValidation() external returns (uint256 phasesRun) {
        address sender;
        address paymaster;
        uint256 requiredPrefund;
        assembly ("memory-safe") {
            sender := calldataload(4)
            paymaster := calldataload(68)
            requiredPrefund := calldataload(164)
        }
        uint256 at = 292; // 4 + 9 * 32: the factory call
        uint256 length;
        assembly ("memory-safe") {
            length := calldataload(196)
        }
        if (length != 0) {
            if (!_replay(4 + 32, 100, at, length, NO_PATCH, 0)) return phasesRun;
            phasesRun++;
        }
        at += length;
        uint256 patchAt = NO_PATCH;
        uint256 missing;
        if (paymaster == address(0)) {
            uint256 deposit = balanceOf(sender);
            missing = deposit > requiredPrefund ? 0 : requiredPrefund - deposit;
            patchAt = MISSING_FUNDS_OFFSET;
        }
        assembly ("memory-safe") {
            length := calldataload(228)
        }
        if (!_replay(4, 100, at, length, patchAt, missing)) return phasesRun;
        phasesRun++;
        at += length;
        if (paymaster != address(0)) {
            assembly ("memory-safe") {
                length := calldataload(260)
            }
            if (_replay(68, 132, at, length, NO_PATCH, 0)) phasesRun++;
        }
    }

    /// Calls the address in the calldata word at `targetAt`, with the gas limit in the word at
    /// `gasAt`, passing `length` bytes of calldata from `dataAt` (the word at `patchAt`, if
    /// inside them, set to `word`), keeping none of what it returns.
    function _replay(uint256 targetAt, uint256 gasAt, uint256 dataAt, uint256 length, uint256 patchAt, uint256 word)
        private
        returns (bool ok)
    {
        assembly ("memory-safe") {
            let ptr := mload(0x40)
            calldatacopy(ptr, dataAt, length)
            if lt(patchAt, length) { mstore(add(ptr, patchAt), word) }
            ok := call(calldataload(gasAt), calldataload(targetAt), 0, ptr, length, 0, 0)
        }
    }

    /// @return callGas the least gas limit for which the call succeeded (0 if it never did)
    /// @return success whether the call succeeded with `maxGas`
    /// @return result the call's return data, or its revert data on failure
    function estimateCallGas(PackedUserOperation calldata op, uint256 maxGas, uint256 tolerance)
        external
        returns (uint256 callGas, bool success, bytes memory result)
    {
        UserOpInfo memory opInfo;
        _simulationOnlyValidations(op);
        _validatePrepayment(0, op, opInfo);
        uint256 used;
        (success, used, result) = _measure(op.sender, op.callData, maxGas);
        if (!success) return (0, false, result);
        uint256 low = used;
        uint256 high = maxGas;
        while (high - low > tolerance) {
            uint256 mid = (low + high) / 2;
            (bool ok,,) = _measure(op.sender, op.callData, mid);
            if (ok) high = mid;
            else low = mid;
        }
        return (high, true, result);
    }

    function _measure(address target, bytes calldata data, uint256 gasLimit)
        internal
        returns (bool ok, uint256 used, bytes memory result)
    {
        try this.callAndRevert(target, data, gasLimit) {}
        catch (bytes memory reason) {
            if (reason.length >= 4 && bytes4(reason) == CallResult.selector) {
                bytes memory args = new bytes(reason.length - 4);
                for (uint256 i = 0; i < args.length; i++) {
                    args[i] = reason[i + 4];
                }
                return abi.decode(args, (bool, uint256, bytes));
            }
            return (false, 0, reason);
        }
    }

    /// Calls `target` with exactly `gasLimit` and reverts with the outcome, undoing its effects.
    function callAndRevert(address target, bytes calldata data, uint256 gasLimit) external {
        uint256 before = gasleft();
        (bool ok, bytes memory ret) = target.call{gas: gasLimit}(data);
        revert CallResult(ok, before - gasleft(), ret);
    }
}
