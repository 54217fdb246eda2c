// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {BasePaymaster} from "@account-abstraction/contracts/core/BasePaymaster.sol";
import {SIG_VALIDATION_FAILED, _packValidationData} from "@account-abstraction/contracts/core/Helpers.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title Entryway verifying paymaster
/// @notice Pays for a UserOperation when one of the service's signers signed the op's fields,
/// the chain id, this paymaster's address and a validity window.
///
/// paymasterAndData = paymaster (20) | verificationGasLimit (16) | postOpGasLimit (16)
///                  | validUntil (6) | validAfter (6) | signature (65)
///
/// Validation never reverts on a bad signature: it returns SIG_VALIDATION_FAILED, and an expired
/// or not-yet-valid window is left to the EntryPoint through the packed validation data.
/// Signers live in storage so they can be rotated with overlap; the paymaster is therefore
/// staked (ERC-7562 allows a staked entity to read its own storage during validation).
contract VerifyingPaymaster is BasePaymaster {
    uint256 private constant VALID_UNTIL_OFFSET = PAYMASTER_DATA_OFFSET;
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6;
    uint256 private constant SIGNATURE_OFFSET = VALID_AFTER_OFFSET + 6;
    uint256 private constant SIGNATURE_LENGTH = 65;

    mapping(address signer => bool) public isSigner;

    event SignerChanged(address indexed signer, bool allowed);

    error InvalidSigner(address signer);

    constructor(IEntryPoint anEntryPoint, address initialOwner, address initialSigner) BasePaymaster(anEntryPoint) {
        // Deployed through the deterministic deployer, so msg.sender is not the operator.
        _transferOwnership(initialOwner);
        _setSigner(initialSigner, true);
    }

    function setSigner(address signer, bool allowed) external onlyOwner {
        _setSigner(signer, allowed);
    }

    /// The digest the signer signs, as an EIP-191 personal message.
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
                bytes32(userOp.paymasterAndData[PAYMASTER_VALIDATION_GAS_OFFSET:PAYMASTER_DATA_OFFSET]),
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
        if (data.length != SIGNATURE_OFFSET + SIGNATURE_LENGTH) return ("", SIG_VALIDATION_FAILED);
        uint48 validUntil = uint48(bytes6(data[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        uint48 validAfter = uint48(bytes6(data[VALID_AFTER_OFFSET:SIGNATURE_OFFSET]));
        bytes32 digest = MessageHashUtils.toEthSignedMessageHash(getHash(userOp, validUntil, validAfter));
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, data[SIGNATURE_OFFSET:]);
        bool failed = err != ECDSA.RecoverError.NoError || !isSigner[signer];
        return ("", _packValidationData(failed, validUntil, validAfter));
    }

    function _setSigner(address signer, bool allowed) private {
        if (signer == address(0)) revert InvalidSigner(signer);
        isSigner[signer] = allowed;
        emit SignerChanged(signer, allowed);
    }
}
