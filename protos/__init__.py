"""The contract: .proto files, their generated code, domain records and the one conversion."""
