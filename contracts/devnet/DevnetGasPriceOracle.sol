// SPDX-License-Identifier: MIT
pragma solidity 0.8.28;

/// Stands in for the OP-stack GasPriceOracle predeploy (0x420...000F) on local devnets of
/// OP-stack chains: the Ecotone interface and L1 data fee formula, with the L1 prices read
/// from storage the devnet writes at start (slot 0: L1 base fee, 1: blob base fee,
/// 2: base fee scalar, 3: blob base fee scalar), where the real chain reads them from L1Block.
/// No constructor: the devnet places the runtime code and the slots directly.
contract DevnetGasPriceOracle {
    uint256 public constant DECIMALS = 6;

    uint256 public l1BaseFee;
    uint256 public blobBaseFee;
    uint256 public baseFeeScalar;
    uint256 public blobBaseFeeScalar;

    /// The L1 data fee, in wei, of posting `data` (an unsigned L2 transaction) to L1.
    function getL1Fee(bytes calldata data) external view returns (uint256) {
        return _fee(getL1GasUsed(data));
    }

    /// The L1 gas `data` would use: 4 per zero byte, 16 per other byte, and 68 bytes for the
    /// signature the unsigned transaction lacks.
    function getL1GasUsed(bytes calldata data) public pure returns (uint256) {
        uint256 gas = 68 * 16;
        for (uint256 i = 0; i < data.length; ++i) {
            gas += data[i] == 0 ? 4 : 16;
        }
        return gas;
    }

    /// The most a transaction of `txSize` bytes can pay for L1 data (every byte non-zero).
    function getL1FeeUpperBound(uint256 txSize) external view returns (uint256) {
        return _fee((txSize + 68) * 16);
    }

    function _fee(uint256 l1Gas) internal view returns (uint256) {
        uint256 scaledBaseFee = baseFeeScalar * 16 * l1BaseFee;
        uint256 scaledBlobBaseFee = blobBaseFeeScalar * blobBaseFee;
        return (l1Gas * (scaledBaseFee + scaledBlobBaseFee)) / (16 * 10 ** DECIMALS);
    }

    function decimals() external pure returns (uint256) {
        return DECIMALS;
    }

    function gasPrice() external view returns (uint256) {
        return block.basefee;
    }

    function baseFee() external view returns (uint256) {
        return block.basefee;
    }

    function isEcotone() external pure returns (bool) {
        return true;
    }

    function isFjord() external pure returns (bool) {
        return false;
    }

    function version() external pure returns (string memory) {
        return "1.2.0-devnet";
    }
}
