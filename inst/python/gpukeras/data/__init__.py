"""Training data: gpu_dataset()'s tf.data pipelines from arrays and files, augmentation,
and the data adapters that turn what gpu_fit() is given into what a training loop reads."""
