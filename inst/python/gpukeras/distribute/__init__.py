"""Several devices and machines: strategies, the cluster a scheduler describes, joining it
on TensorFlow and on JAX, and who can reach the workers' ports."""
