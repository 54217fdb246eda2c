"""What operators watch a running service by: readiness, Prometheus metrics, structured logs."""
