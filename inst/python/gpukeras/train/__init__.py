"""Training: gpu_fit()'s request, the training loops (Keras' fit() loop, the device-resident
loop, the multi-worker loop), backups and preemption, the monitor and its report, background
jobs, and the one way to copy the user's model for the verbs that must leave it unchanged."""
