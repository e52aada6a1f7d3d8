"""The device agent: a gRPC server on each chip host; candidate code runs only in its sandbox workers."""
