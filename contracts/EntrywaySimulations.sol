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

    /// The calls `_validatePrepayment` makes to an op's entities, encoded by the bundler.
    struct ValidationCalls {
        address sender;
        address senderCreator;
        bytes factoryCall; // createSender(initCode) on the SenderCreator, or empty
        bytes accountCall; // validateUserOp(op, userOpHash, 0): missingAccountFunds set here
        uint256 verificationGasLimit;
        uint256 requiredPrefund;
        address paymaster; // zero when the op has none
        bytes paymasterCall; // validatePaymasterUserOp(op, userOpHash, requiredPrefund)
        uint256 paymasterVerificationGasLimit;
    }

    /// @notice Makes the entities' validation calls as the EntryPoint does (same order,
    /// calldata and gas limits; missingAccountFunds from the sender's deposit once deployed)
    /// and nothing more. The EntryPoint's own bookkeeping, which ERC-7562 does not judge, is
    /// most of a traced `simulateValidation`; the bundler traces this instead and takes the
    /// op's result from an untraced `simulateValidation`.
    /// @return phasesRun how many calls succeeded, in order; it stops at the first failure
    function traceValidation(ValidationCalls calldata calls) external returns (uint256 phasesRun) {
        if (calls.factoryCall.length != 0) {
            (bool created,) = calls.senderCreator.call{gas: calls.verificationGasLimit}(calls.factoryCall);
            if (!created) return phasesRun;
            phasesRun++;
        }
        bytes memory accountCall = calls.accountCall;
        if (calls.paymaster == address(0)) {
            uint256 deposit = balanceOf(calls.sender);
            uint256 missing = deposit > calls.requiredPrefund ? 0 : calls.requiredPrefund - deposit;
            assembly ("memory-safe") {
                // after the length word, the selector, the op's offset and the hash
                mstore(add(accountCall, 100), missing)
            }
        }
        (bool validated,) = calls.sender.call{gas: calls.verificationGasLimit}(accountCall);
        if (!validated) return phasesRun;
        phasesRun++;
        if (calls.paymaster != address(0)) {
            (bool sponsored,) = calls.paymaster.call{gas: calls.paymasterVerificationGasLimit}(calls.paymasterCall);
            if (sponsored) phasesRun++;
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
