"""Generation methods, one module each."""
