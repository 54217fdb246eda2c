// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {IEntryPoint as IEntryPointV07} from "@account-abstraction/contracts-v07/interfaces/IEntryPoint.sol";
import {IERC165} from "@openzeppelin/contracts/utils/introspection/IERC165.sol";
import {VerifyingPaymaster} from "./VerifyingPaymaster.sol";

/// @title Entryway verifying paymaster for EntryPoint v0.7
/// @notice The same paymaster, paymasterAndData layout and signed digest as VerifyingPaymaster,
/// for accounts on EntryPoint v0.7. v0.7 and v0.8 call a paymaster through the same
/// PackedUserOperation ABI; what differs is the EntryPoint's interface id, which BasePaymaster
/// checks at construction so a paymaster cannot be bound to an EntryPoint it was not built for.
contract VerifyingPaymasterV07 is VerifyingPaymaster {
    constructor(IEntryPoint anEntryPoint, address initialOwner, address initialSigner)
        VerifyingPaymaster(anEntryPoint, initialOwner, initialSigner)
    {}

    function _validateEntryPointInterface(IEntryPoint _entryPoint) internal view override {
        require(
            IERC165(address(_entryPoint)).supportsInterface(type(IEntryPointV07).interfaceId),
            "IEntryPoint v0.7 interface mismatch"
        );
    }
}
