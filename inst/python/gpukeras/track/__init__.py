"""Tracked runs (gpu_track()): where runs go in MLflow, what a fit's, a cv's and a search's
runs hold, their sending on a thread of their own, and runs read back (gpu_runs(),
gpu_compare_runs(), a run's model)."""
