"""cublas problems: one module per problem."""
