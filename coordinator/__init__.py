"""The coordinator: CLI, sweep planning, Ray execution, routing to agents, store, metrics, reports."""
