device_columns <- c(
  "device", "type", "name", "compute_capability",
  "memory_total_mib", "memory_free_mib", "nvml_index",
  "uuid", "pci_bus_id", "mig_parent", "nvml_reason"
)

#' Devices the Keras backend can use
#'
#' Lists the CPU and every GPU visible to the running backend (TensorFlow or
#' JAX), with what the NVIDIA driver (NVML) adds: memory total and free.
#' Starts Python and the backend if they are not running yet.
#'
#' GPUs are numbered as CUDA shows them to this process (`GPU:0` is CUDA's
#' first GPU after `CUDA_VISIBLE_DEVICES`), which need not be `nvidia-smi`'s
#' numbering. Each is matched to the driver's GPU by UUID, as the CUDA driver
#' reports it, never by position. A MIG instance is listed as itself: its
#' own `MIG-` UUID and memory.
#'
#' @param ... Not used: an argument gpu_devices() does not have is an
#'   error that says what to use instead (the one meant, for a misspelt one).
#' @return A data.frame with one row per device: `device` (`"CPU:0"`,
#'   `"GPU:0"`, ...), `type`, `name`, `compute_capability` (e.g. `"9.0"`;
#'   `NA` for the CPU), `memory_total_mib`, `memory_free_mib` (`NA` when
#'   unknown), `nvml_index` (`nvidia-smi`'s index of that GPU; `NA` for a MIG
#'   instance or when the driver does not know the GPU, and `nvml_reason` says
#'   why), `uuid` (`"GPU-..."` or `"MIG-..."`), `pci_bus_id` and `mig_parent`
#'   (for a MIG instance, `nvidia-smi`'s index of its GPU).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_devices()
#' }
gpu_devices <- function(...) {
  check_unknown_args("gpu_devices")
  rows_to_df(core_call("devices"), device_columns)
}
