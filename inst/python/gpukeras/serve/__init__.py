"""A trained model serving predictions: predict() and evaluate() of new data (in memory,
and into a CSV file), gpu_save()/gpu_load() with the encoding beside the model, gpu_export()
for serving outside R, a model's inputs and outputs for gpu_serve()'s /metadata, and
gpu_serve()'s front process."""
