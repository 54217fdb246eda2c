// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts-v09/core/BasePaymaster.sol";
import {SIG_VALIDATION_FAILED, _packValidationData} from "@account-abstraction/contracts-v09/core/Helpers.sol";
import {UserOperationLib} from "@account-abstraction/contracts-v09/core/UserOperationLib.sol";
import {IEntryPoint} from "@account-abstraction/contracts-v09/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts-v09/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title Entryway's verifying paymaster for EntryPoint v0.9, signing in parallel with the account
/// @notice Sponsors an op that carries the service signer's signature over `getHash` (the same
/// digest as VerifyingPaymaster's). The signature sits in v0.9's paymasterSignature suffix:
///   paymasterAndData = paymaster | verificationGasLimit | postOpGasLimit
///                    | validUntil (6) | validAfter (6) | signature (65) | uint16(65) | magic (8)
/// The EntryPoint leaves the signature out of the userOpHash, so the account may sign the op
/// before the paymaster has: neither signature covers the other.
contract VerifyingPaymasterV09 is BasePaymaster {
    using UserOperationLib for bytes;

    uint256 private constant VALID_UNTIL_OFFSET = PAYMASTER_DATA_OFFSET;
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6;
    uint256 private constant SIGNED_DATA_END = VALID_AFTER_OFFSET + 6;
    uint256 private constant SIGNATURE_LENGTH = 65;

    mapping(address signer => bool) public isSigner;

    event SignerChanged(address indexed signer, bool allowed);

    error InvalidSigner(address signer);

    constructor(IEntryPoint anEntryPoint, address initialOwner, address initialSigner)
        BasePaymaster(anEntryPoint, initialOwner)
    {
        _setSigner(initialSigner, true);
    }

    function setSigner(address signer, bool allowed) external onlyOwner {
        _setSigner(signer, allowed);
    }

    /// @notice What the signer signs (EIP-191): the op's fields with the paymaster's gas
    /// limits, the chain, this paymaster and the validity window; never paymasterData itself.
    function getHash(PackedUserOperation calldata userOp, uint48 validUntil, uint48 validAfter)
        public
        view
        returns (bytes32)
    {
        return keccak256(
            abi.encode(
                userOp.sender,
                userOp.nonce,
                keccak256(userOp.initCode),
                keccak256(userOp.callData),
                userOp.accountGasLimits,
                bytes32(userOp.paymasterAndData[UserOperationLib.PAYMASTER_VALIDATION_GAS_OFFSET:PAYMASTER_DATA_OFFSET]),
                userOp.preVerificationGas,
                userOp.gasFees,
                block.chainid,
                address(this),
                validUntil,
                validAfter
            )
        );
    }

    function _validatePaymasterUserOp(PackedUserOperation calldata userOp, bytes32, uint256)
        internal
        view
        override
        returns (bytes memory context, uint256 validationData)
    {
        bytes calldata data = userOp.paymasterAndData;
        bytes calldata signature = data.getPaymasterSignature();
        bytes calldata signed = data.getSignedPaymasterData();
        if (signature.length != SIGNATURE_LENGTH || signed.length != SIGNED_DATA_END - PAYMASTER_DATA_OFFSET) {
            return ("", SIG_VALIDATION_FAILED);
        }
        uint48 validUntil = uint48(bytes6(data[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        uint48 validAfter = uint48(bytes6(data[VALID_AFTER_OFFSET:SIGNED_DATA_END]));
        bytes32 digest = MessageHashUtils.toEthSignedMessageHash(getHash(userOp, validUntil, validAfter));
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, signature);
        bool failed = err != ECDSA.RecoverError.NoError || !isSigner[signer];
        return ("", _packValidationData(failed, validUntil, validAfter));
    }

    function _setSigner(address signer, bool allowed) private {
        if (signer == address(0)) revert InvalidSigner(signer);
        isSigner[signer] = allowed;
        emit SignerChanged(signer, allowed);
    }
}
