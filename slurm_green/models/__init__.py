"""Throughput and energy models of DL jobs, fitted from measured profiles."""
