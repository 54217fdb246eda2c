// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {IEntryPoint} from "@account-abstraction/contracts-v06/interfaces/IEntryPoint.sol";
import {IPaymaster} from "@account-abstraction/contracts-v06/interfaces/IPaymaster.sol";
import {UserOperation} from "@account-abstraction/contracts-v06/interfaces/UserOperation.sol";
import {Ownable} from "@openzeppelin/contracts/access/Ownable.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {MessageHashUtils} from "@openzeppelin/contracts/utils/cryptography/MessageHashUtils.sol";

/// @title Entryway verifying paymaster for EntryPoint v0.6
/// @notice Pays for a v0.6 UserOperation when one of the service's signers signed the op's
/// fields, the chain id, this paymaster's address and a validity window: the scheme of
/// VerifyingPaymaster, on v0.6's unpacked struct. v0.6's paymasterAndData carries no paymaster
/// gas limits (its validation and postOp run under the op's verificationGasLimit), so:
///
/// paymasterAndData = paymaster (20) | validUntil (6) | validAfter (6) | signature (65)
///
/// Written against the release's IPaymaster rather than its BasePaymaster, whose Ownable
/// predates the OpenZeppelin release the other contracts build on. Validation never reverts on
/// a bad signature: it returns SIG_VALIDATION_FAILED (1), and the window goes to the EntryPoint
/// in the packed validation data. Signers live in storage (rotation with overlap), so the
/// paymaster is staked, as ERC-7562 asks of an entity that reads its own storage.
contract VerifyingPaymasterV06 is IPaymaster, Ownable {
    uint256 private constant VALID_UNTIL_OFFSET = 20;
    uint256 private constant VALID_AFTER_OFFSET = VALID_UNTIL_OFFSET + 6;
    uint256 private constant SIGNATURE_OFFSET = VALID_AFTER_OFFSET + 6;
    uint256 private constant SIGNATURE_LENGTH = 65;
    uint256 private constant SIG_VALIDATION_FAILED = 1;

    IEntryPoint public immutable entryPoint;
    mapping(address signer => bool) public isSigner;

    event SignerChanged(address indexed signer, bool allowed);

    error InvalidSigner(address signer);
    error NotFromEntryPoint(address caller);

    constructor(IEntryPoint anEntryPoint, address initialOwner, address initialSigner) Ownable(initialOwner) {
        // Deployed through the deterministic deployer, so msg.sender is not the operator.
        entryPoint = anEntryPoint;
        _setSigner(initialSigner, true);
    }

    function setSigner(address signer, bool allowed) external onlyOwner {
        _setSigner(signer, allowed);
    }

    /// The digest the signer signs, as an EIP-191 personal message: every field of the op but
    /// paymasterAndData and signature, then the chain, this paymaster and the window.
    function getHash(UserOperation calldata userOp, uint48 validUntil, uint48 validAfter)
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
                userOp.callGasLimit,
                userOp.verificationGasLimit,
                userOp.preVerificationGas,
                userOp.maxFeePerGas,
                userOp.maxPriorityFeePerGas,
                block.chainid,
                address(this),
                validUntil,
                validAfter
            )
        );
    }

    function validatePaymasterUserOp(UserOperation calldata userOp, bytes32, uint256)
        external
        view
        override
        returns (bytes memory context, uint256 validationData)
    {
        _requireFromEntryPoint();
        bytes calldata data = userOp.paymasterAndData;
        if (data.length != SIGNATURE_OFFSET + SIGNATURE_LENGTH) return ("", SIG_VALIDATION_FAILED);
        uint48 validUntil = uint48(bytes6(data[VALID_UNTIL_OFFSET:VALID_AFTER_OFFSET]));
        uint48 validAfter = uint48(bytes6(data[VALID_AFTER_OFFSET:SIGNATURE_OFFSET]));
        bytes32 digest = MessageHashUtils.toEthSignedMessageHash(getHash(userOp, validUntil, validAfter));
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, data[SIGNATURE_OFFSET:]);
        bool failed = err != ECDSA.RecoverError.NoError || !isSigner[signer];
        // v0.6's validation data: sigFailed (bit 0) | validUntil << 160 | validAfter << 208.
        validationData = (failed ? SIG_VALIDATION_FAILED : 0) | (uint256(validUntil) << 160)
            | (uint256(validAfter) << 208);
        return ("", validationData);
    }

    /// Never called: validation returns an empty context, so the EntryPoint skips postOp.
    function postOp(PostOpMode, bytes calldata, uint256) external view override {
        _requireFromEntryPoint();
        revert("postOp not expected");
    }

    /// Funds the paymaster's deposit at the EntryPoint, which pays for the ops it sponsors.
    function deposit() external payable {
        entryPoint.depositTo{value: msg.value}(address(this));
    }

    function getDeposit() external view returns (uint256) {
        return entryPoint.balanceOf(address(this));
    }

    function withdrawTo(address payable withdrawAddress, uint256 amount) external onlyOwner {
        entryPoint.withdrawTo(withdrawAddress, amount);
    }

    function addStake(uint32 unstakeDelaySec) external payable onlyOwner {
        entryPoint.addStake{value: msg.value}(unstakeDelaySec);
    }

    function unlockStake() external onlyOwner {
        entryPoint.unlockStake();
    }

    function withdrawStake(address payable withdrawAddress) external onlyOwner {
        entryPoint.withdrawStake(withdrawAddress);
    }

    function _requireFromEntryPoint() private view {
        if (msg.sender != address(entryPoint)) revert NotFromEntryPoint(msg.sender);
    }

    function _setSigner(address signer, bool allowed) private {
        if (signer == address(0)) revert InvalidSigner(signer);
        isSigner[signer] = allowed;
        emit SignerChanged(signer, allowed);
    }
}
