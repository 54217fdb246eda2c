"""The paymaster: ERC-7677 methods, sponsorship policies, the signer and the deposit."""
