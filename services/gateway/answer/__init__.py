"""Answer use cases: the self-healing fallback chain over retrievals, the
grounded prompt and the extractive answer, generation, and abstention."""
