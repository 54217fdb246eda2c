"""Pure domain core: no I/O, no framework. Integers for money, credits, gas and wei."""
