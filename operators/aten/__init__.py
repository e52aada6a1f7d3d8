"""aten problems: one module per problem."""
