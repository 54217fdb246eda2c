"""Gas: preVerificationGas, fee suggestions, and simulation-based limits."""
