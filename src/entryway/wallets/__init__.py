"""Smart wallets: reading, creating and recovering accounts (SmartAccount via AccountFactory)."""
