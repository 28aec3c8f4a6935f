"""The hidden tests: the public checks' behaviours on inputs students never see (as secret as the call plan)."""
