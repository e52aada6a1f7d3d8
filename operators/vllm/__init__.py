"""vllm problems: one module per problem."""
