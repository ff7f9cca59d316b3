"""GPU power control on compute nodes: the Prolog caps a job's GPUs, the Epilog restores them.

One interface (``power.PowerBackend``) with two backends: NVML for real GPUs and an
emulated per-node state file for the Docker test cluster. The Prolog imports this
package on every job start, so nothing here imports more than it needs: the NVML
binding is imported only when the NVML backend is tried.
"""
