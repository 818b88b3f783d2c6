device_columns <- c(
  "device", "type", "name", "compute_capability",
  "memory_total_mib", "memory_free_mib", "nvml_index"
)

#' Devices the Keras backend can use
#'
#' Lists the CPU and every GPU visible to the running backend (TensorFlow or
#' JAX), with what the NVIDIA driver (NVML) adds: memory total and free.
#' Starts Python and the backend if they are not running yet.
#'
#' @return A data.frame with one row per device: `device` (`"CPU:0"`,
#'   `"GPU:0"`, ...), `type`, `name`, `compute_capability` (e.g. `"9.0"`;
#'   `NA` for the CPU), `memory_total_mib`, `memory_free_mib` (`NA` when
#'   unknown) and `nvml_index` (the driver's index of that GPU).
#' @export
#' @examples
#' if (!is.null(gpukeras_python())) {
#'   gpu_devices()
#' }
gpu_devices <- function() {
  rows_to_df(core_call("devices.list_devices"), device_columns)
}
