// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

import {BaseAccount} from "@account-abstraction/contracts/core/BaseAccount.sol";
import {
    SIG_VALIDATION_FAILED,
    SIG_VALIDATION_SUCCESS,
    _packValidationData
} from "@account-abstraction/contracts/core/Helpers.sol";
import {IEntryPoint} from "@account-abstraction/contracts/interfaces/IEntryPoint.sol";
import {PackedUserOperation} from "@account-abstraction/contracts/interfaces/PackedUserOperation.sol";
import {TokenCallbackHandler} from "@account-abstraction/contracts/accounts/callback/TokenCallbackHandler.sol";
import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {Initializable} from "@openzeppelin/contracts/proxy/utils/Initializable.sol";
import {UUPSUpgradeable} from "@openzeppelin/contracts/proxy/utils/UUPSUpgradeable.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";

/// @title Entryway smart account for EntryPoint v0.8
/// @notice One ECDSA owner, optional guardians, and timelocked social recovery.
///
/// UserOperations are authorised in one of three ways, chosen by the call they make:
///  - any call: the owner's signature over the v0.8 userOpHash (an EIP-712 digest);
///  - `startRecovery(newOwner, approvals)`: the guardians' EIP-712 approvals carried in the
///    call data itself, so a recovery can be submitted gaslessly while the owner key is lost;
///  - `finalizeRecovery()`: no signature; the op is valid only once the pending recovery's
///    delay has passed, which the EntryPoint enforces through the returned `validAfter`
///    (the account never reads TIMESTAMP during validation, as ERC-7562 OP-011 requires).
contract SmartAccount is BaseAccount, TokenCallbackHandler, IERC1271, EIP712, UUPSUpgradeable, Initializable {
    struct PendingRecovery {
        address newOwner;
        uint48 executeAfter;
    }

    bytes32 public constant RECOVERY_APPROVAL_TYPEHASH =
        keccak256("RecoveryApproval(address account,address newOwner,uint256 recoveryNonce,uint256 chainId)");
    bytes32 public constant MESSAGE_TYPEHASH = keccak256("SmartAccountMessage(bytes32 hash)");
    /// Bounds the signature loop of a recovery, and so the gas of its validation.
    uint256 public constant MAX_GUARDIANS = 16;
    uint48 public constant DEFAULT_RECOVERY_DELAY = 2 days;
    uint48 public constant MIN_RECOVERY_DELAY = 1 hours;

    IEntryPoint private immutable _entryPoint;

    // owner, guardianCount and guardianThreshold share one slot; a custom delay takes the next.
    address public owner;
    uint32 public guardianCount;
    uint32 public guardianThreshold;
    uint48 private _customRecoveryDelay; // 0: DEFAULT_RECOVERY_DELAY, so deploying writes nothing here
    uint256 public recoveryNonce;
    mapping(address guardian => bool) public isGuardian;
    PendingRecovery private _pending;

    event SmartAccountInitialized(IEntryPoint indexed entryPoint, address indexed owner);
    event GuardianAdded(address indexed guardian);
    event GuardianRemoved(address indexed guardian);
    event GuardianThresholdChanged(uint256 threshold);
    event RecoveryDelayChanged(uint256 delay);
    event RecoveryStarted(address indexed newOwner, uint256 executeAfter, uint256 recoveryNonce);
    event RecoveryFinalized(address indexed previousOwner, address indexed newOwner);
    event RecoveryCancelled(address indexed newOwner, uint256 recoveryNonce);

    error NotSelf(address caller);
    error NotOwnerOrEntryPoint(address caller);
    error InvalidGuardian(address guardian);
    error TooManyGuardians();
    error InvalidThreshold(uint256 threshold, uint256 guardianCount);
    error RecoveryDelayTooShort(uint256 delay);
    error InvalidNewOwner(address newOwner);
    error NotEnoughApprovals();
    error RecoveryAlreadyPending();
    error NoPendingRecovery();
    error RecoveryNotDue(uint256 executeAfter);

    modifier onlySelf() {
        if (msg.sender != address(this)) revert NotSelf(msg.sender);
        _;
    }

    constructor(IEntryPoint anEntryPoint) EIP712("EntrywaySmartAccount", "1") {
        _entryPoint = anEntryPoint;
        _disableInitializers();
    }

    receive() external payable {}

    function initialize(address anOwner) external initializer {
        if (anOwner == address(0)) revert InvalidNewOwner(anOwner);
        owner = anOwner;
        emit SmartAccountInitialized(_entryPoint, anOwner);
    }

    /// @inheritdoc BaseAccount
    function entryPoint() public view override returns (IEntryPoint) {
        return _entryPoint;
    }

    // ---------------------------------------------------------------- validation

    function _validateSignature(PackedUserOperation calldata userOp, bytes32 userOpHash)
        internal
        view
        override
        returns (uint256 validationData)
    {
        bytes calldata callData = userOp.callData;
        if (callData.length >= 4) {
            bytes4 selector = bytes4(callData[:4]);
            if (selector == this.startRecovery.selector) {
                return _validateRecoveryStart(callData[4:]);
            }
            if (selector == this.finalizeRecovery.selector) {
                return _validateRecoveryFinalization();
            }
        }
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(userOpHash, userOp.signature);
        if (err != ECDSA.RecoverError.NoError || signer != owner) return SIG_VALIDATION_FAILED;
        return SIG_VALIDATION_SUCCESS;
    }

    function _validateRecoveryStart(bytes calldata args) private view returns (uint256) {
        if (_pending.executeAfter != 0) return SIG_VALIDATION_FAILED;
        (address newOwner, bytes[] memory approvals) = abi.decode(args, (address, bytes[]));
        if (newOwner == address(0) || !_hasGuardianQuorum(recoveryDigest(newOwner), approvals)) {
            return SIG_VALIDATION_FAILED;
        }
        return SIG_VALIDATION_SUCCESS;
    }

    function _validateRecoveryFinalization() private view returns (uint256) {
        uint48 executeAfter = _pending.executeAfter;
        if (executeAfter == 0) return SIG_VALIDATION_FAILED;
        return _packValidationData(false, 0, executeAfter);
    }

    function _requireForExecute() internal view override {
        if (msg.sender != address(_entryPoint) && msg.sender != owner) revert NotOwnerOrEntryPoint(msg.sender);
    }

    // ---------------------------------------------------------------- ERC-1271

    /// The owner signs `messageDigest(hash)`, not `hash` itself: the EIP-712 wrapping binds the
    /// signature to this account and chain, so one owner key cannot replay it on a sibling account.
    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(messageDigest(hash), signature);
        if (err == ECDSA.RecoverError.NoError && signer == owner) return IERC1271.isValidSignature.selector;
        return bytes4(0xffffffff);
    }

    function messageDigest(bytes32 hash) public view returns (bytes32) {
        return _hashTypedDataV4(keccak256(abi.encode(MESSAGE_TYPEHASH, hash)));
    }

    // ---------------------------------------------------------------- guardians

    function addGuardian(address guardian) external onlySelf {
        if (guardian == address(0) || guardian == address(this) || guardian == owner || isGuardian[guardian]) {
            revert InvalidGuardian(guardian);
        }
        if (guardianCount >= MAX_GUARDIANS) revert TooManyGuardians();
        isGuardian[guardian] = true;
        guardianCount += 1;
        emit GuardianAdded(guardian);
        if (guardianThreshold == 0) _setThreshold(1);
    }

    function removeGuardian(address guardian) external onlySelf {
        if (!isGuardian[guardian]) revert InvalidGuardian(guardian);
        delete isGuardian[guardian];
        guardianCount -= 1;
        emit GuardianRemoved(guardian);
        if (guardianThreshold > guardianCount) _setThreshold(guardianCount);
    }

    function setGuardianThreshold(uint32 threshold) external onlySelf {
        if (threshold == 0 || threshold > guardianCount) revert InvalidThreshold(threshold, guardianCount);
        _setThreshold(threshold);
    }

    function setRecoveryDelay(uint48 delay) external onlySelf {
        if (delay < MIN_RECOVERY_DELAY) revert RecoveryDelayTooShort(delay);
        _customRecoveryDelay = delay;
        emit RecoveryDelayChanged(delay);
    }

    function recoveryDelay() public view returns (uint48) {
        uint48 custom = _customRecoveryDelay;
        return custom == 0 ? DEFAULT_RECOVERY_DELAY : custom;
    }

    function _setThreshold(uint32 threshold) private {
        guardianThreshold = threshold;
        emit GuardianThresholdChanged(threshold);
    }

    // ---------------------------------------------------------------- recovery

    /// The EIP-712 digest a guardian signs to approve `newOwner` under the current recovery nonce.
    function recoveryDigest(address newOwner) public view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(abi.encode(RECOVERY_APPROVAL_TYPEHASH, address(this), newOwner, recoveryNonce, block.chainid))
        );
    }

    /// Anyone may submit the guardians' approvals (a relayer or a UserOperation): the approvals
    /// are the authority. They must come sorted by guardian address, strictly ascending.
    function startRecovery(address newOwner, bytes[] calldata approvals) external {
        if (_pending.executeAfter != 0) revert RecoveryAlreadyPending();
        if (newOwner == address(0) || newOwner == address(this)) revert InvalidNewOwner(newOwner);
        if (!_hasGuardianQuorum(recoveryDigest(newOwner), approvals)) revert NotEnoughApprovals();
        uint48 executeAfter = uint48(block.timestamp) + recoveryDelay();
        _pending = PendingRecovery(newOwner, executeAfter);
        emit RecoveryStarted(newOwner, executeAfter, recoveryNonce);
    }

    function finalizeRecovery() external {
        PendingRecovery memory pending = _pending;
        if (pending.executeAfter == 0) revert NoPendingRecovery();
        if (block.timestamp < pending.executeAfter) revert RecoveryNotDue(pending.executeAfter);
        address previousOwner = owner;
        owner = pending.newOwner;
        delete _pending;
        recoveryNonce += 1;
        emit RecoveryFinalized(previousOwner, pending.newOwner);
    }

    /// The owner, directly or through a UserOperation, may cancel during the delay.
    function cancelRecovery() external {
        if (msg.sender != owner && msg.sender != address(this)) revert NotSelf(msg.sender);
        PendingRecovery memory pending = _pending;
        if (pending.executeAfter == 0) revert NoPendingRecovery();
        delete _pending;
        emit RecoveryCancelled(pending.newOwner, recoveryNonce);
        recoveryNonce += 1;
    }

    function pendingRecovery() external view returns (address newOwner, uint256 executeAfter) {
        return (_pending.newOwner, _pending.executeAfter);
    }

    function _hasGuardianQuorum(bytes32 digest, bytes[] memory approvals) private view returns (bool) {
        uint256 threshold = guardianThreshold;
        if (threshold == 0 || approvals.length < threshold || approvals.length > MAX_GUARDIANS) return false;
        address previous = address(0);
        for (uint256 i = 0; i < approvals.length; i++) {
            (address guardian, ECDSA.RecoverError err,) = ECDSA.tryRecover(digest, approvals[i]);
            if (err != ECDSA.RecoverError.NoError || guardian <= previous || !isGuardian[guardian]) return false;
            previous = guardian;
        }
        return true;
    }

    // ---------------------------------------------------------------- deposit and upgrades

    function getDeposit() external view returns (uint256) {
        return _entryPoint.balanceOf(address(this));
    }

    function addDeposit() external payable {
        _entryPoint.depositTo{value: msg.value}(address(this));
    }

    function withdrawDepositTo(address payable to, uint256 amount) external onlySelf {
        _entryPoint.withdrawTo(to, amount);
    }

    function _authorizeUpgrade(address) internal view override onlySelf {}
}
