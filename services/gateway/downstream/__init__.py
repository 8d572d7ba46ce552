"""The downstream services as the gateway sees them: one small interface
per service (interfaces), their gRPC adapters, a circuit breaker per
service, and deadlines with the one guarded call."""
