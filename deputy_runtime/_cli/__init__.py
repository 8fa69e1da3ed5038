"""Implementations of the ``deputy-runtime`` subcommands, one module per job."""
