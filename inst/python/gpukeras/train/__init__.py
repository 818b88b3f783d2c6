"""Training: gpu_fit()'s request, the training loops (Keras' fit() loop, the device-resident
loop, the multi-worker loop), backups and preemption, the monitor and its report, and
background jobs."""
