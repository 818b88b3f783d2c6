#' Errors and warnings gpukeras raises
#'
#' Every error a user can cause is an [rlang][rlang::abort] error of class
#' `c("gpukeras_error_<what>", "gpukeras_error", "rlang_error", "error",
#' "condition")`, raised in the name of the exported function the user called
#' (`conditionCall()` is that call, however deep the check that failed), with
#' a message whose first line says what is wrong and whose bullets say why and
#' what to do. Catch them by class with [tryCatch()] or
#' [rlang::try_fetch()]; test them with
#' `testthat::expect_error(class = )`. Errors raised by the Python core cross
#' the bridge with the same classes (the core's `GpukerasError` subclasses
#' each name theirs); a Python traceback is never printed.
#'
#' @section Arguments and data:
#' \describe{
#'   \item{`gpukeras_error_bad_argument`}{An argument has the wrong type or
#'     value, or arguments that exclude each other were given together. Raised
#'     by every exported function, mostly before Python starts.}
#'   \item{`gpukeras_error_bad_data`}{Training data cannot be used as it is:
#'     NA values, text features, rows of x and y that do not match, data the
#'     model does not accept, CSV files whose headers differ, or data that does
#'     not fit a background fit. [gpu_as_numpy()], [gpu_dataset()], and the
#'     verbs that train ([gpu_fit()], [gpu_batch_size()], [gpu_tune()],
#'     [gpu_lr_find()], [gpu_profile()], [gpu_quantize()]), and new data for
#'     [predict.gpukeras_fit()] and [evaluate.gpukeras_fit()] whose columns or
#'     types are not the training data's.}
#'   \item{`gpukeras_error_missing_values`}{A `gpukeras_error_bad_data`: the
#'     data has NA/NaN rows and the NA rule is `"error"` ([gpu_dataset()], the
#'     verbs that train, [predict.gpukeras_fit()], [evaluate.gpukeras_fit()]).
#'     The condition's `column` names the columns with NA (`x$region`: a
#'     factor's indicator columns once), `rows` the first 100 such rows and
#'     `n_rows` how many there are.}
#'   \item{`gpukeras_error_not_finite`}{A `gpukeras_error_bad_data`: the data
#'     has Inf, -Inf or numbers beyond float32's range (the verbs that train,
#'     [predict.gpukeras_fit()], [evaluate.gpukeras_fit()]). Its `column`,
#'     `rows` and `n_rows` say where, as for `gpukeras_error_missing_values`.}
#'   \item{`gpukeras_error_wrong_type`}{A `gpukeras_error_bad_data`: a column
#'     of new data is not of its training type ([predict.gpukeras_fit()],
#'     [evaluate.gpukeras_fit()]). Its `column` names it (`x$income`) and
#'     `type` gives its [typeof()].}
#'   \item{`gpukeras_error_new_levels`}{New data has a factor level (or
#'     image class) the training data did not have: [predict.gpukeras_fit()],
#'     [evaluate.gpukeras_fit()], `gpu_dataset(like = )`. The condition's
#'     `column` and `levels` name them; `unknown = "zero"` (one-hot columns) or
#'     `unknown = "code"` (integer codes) scores them instead.}
#'   \item{`gpukeras_error_missing_files`}{A path given to [gpu_dataset()]
#'     names no folder, CSV or TFRecord files, or a folder with nothing to read.}
#'   \item{`gpukeras_error_bad_image`}{A file in an image folder is not an
#'     image TensorFlow can decode ([gpu_dataset()]).}
#'   \item{`gpukeras_error_bad_map`}{A `map` function given to [gpu_dataset()]
#'     failed when tf.data traced it.}
#'   \item{`gpukeras_error_bad_model`}{The model is not a Keras 3 model, or
#'     cannot be used as it is (copied, quantized, distributed; not built, for
#'     [gpu_memory_plan()]).}
#'   \item{`gpukeras_error_model_not_compiled`}{A model given to a verb that
#'     trains, or to [gpu_memory_plan()], has no optimizer and loss yet: compile
#'     it first.}
#'   \item{`gpukeras_error_export`}{[gpu_export()] cannot export the model as
#'     asked: layers the format has no operation for (named), a package the
#'     format needs that is not installed (`install_gpukeras(extras = "onnx")`),
#'     or an engine it cannot export from (ONNX from JAX without jax2onnx).}
#' }
#'
#' @section The Python environment and the stack:
#' \describe{
#'   \item{`gpukeras_error_no_python_env`}{No Python environment for gpukeras
#'     was found, or `GPUKERAS_PYTHON` / `RETICULATE_PYTHON` names a file that
#'     does not exist. Raised by the first call that needs Python.}
#'   \item{`gpukeras_error_python_start`}{The Python that was found could not
#'     be started.}
#'   \item{`gpukeras_error_numpy_version`}{NumPy 2 is installed but this
#'     reticulate (before 1.38) cannot convert its arrays.}
#'   \item{`gpukeras_error_keras_missing`, `gpukeras_error_keras2`}{Keras is
#'     not installed, or it is Keras 2 where gpukeras needs Keras 3.}
#'   \item{`gpukeras_error_keras_too_old`}{The Keras installed has a
#'     published way to run code from a model file even with `safe_mode`
#'     (before 3.12.1, or 3.13.0-3.13.1), which [gpu_load()] relies on; the
#'     message names the advisories. `gpu_check(fix = TRUE)` installs
#'     [install_gpukeras()]'s Keras.}
#'   \item{`gpukeras_error_tensorflow_missing`,
#'     `gpukeras_error_tensorflow_too_old`}{The backend is TensorFlow but it is
#'     not installed, or older than 2.16.}
#'   \item{`gpukeras_error_backend_missing`,
#'     `gpukeras_error_backend_unsupported`}{`KERAS_BACKEND` names a backend
#'     that is not installed, or one gpukeras does not support (torch).}
#'   \item{`gpukeras_error_no_python`, `gpukeras_error_install`}{
#'     [install_gpukeras()] found no Python to make the environment with, or
#'     a step of making it (venv, pip) failed.}
#'   \item{`gpukeras_error_repair`}{`gpu_check(fix = TRUE)` uninstalled a
#'     package and could neither install its replacement nor put it back: the
#'     message gives the command that restores it.}
#'   \item{`gpukeras_error_python`}{The Python core failed in a way that is not
#'     the user's doing: a bug to report. The traceback is kept on the
#'     condition as `python_traceback`.}
#' }
#'
#' @section Devices and settings:
#' \describe{
#'   \item{`gpukeras_error_runtime_started`}{A setting that only works before
#'     the backend starts ([gpu_setup()]'s memory, devices, threads; joining a
#'     cluster) was asked for after it started.}
#'   \item{`gpukeras_error_unknown_device`}{A device that does not exist was
#'     named ([gpu_setup()], [with_gpu_device()], [gpu_strategy()],
#'     [gpu_memory_plan()]).}
#'   \item{`gpukeras_error_out_of_memory`}{The device could not allocate the
#'     memory a training step needed ([gpu_fit()], on TensorFlow or JAX), or
#'     even the smallest batch asked for does not fit in the device's memory
#'     or in `memory_budget_mib` ([gpu_batch_size()], [gpu_tune()]), or no
#'     micro-batch fits by the memory plan ([gpu_fit()] with `accumulate =
#'     "auto"`). After an allocation failure the message says what took the
#'     memory and which changes would lower the peak, with their expected
#'     peaks (a smaller batch, mixed precision, accumulation,
#'     rematerialization), and the condition's `plan` field holds the
#'     [gpu_memory_plan()] data; the session and the model stay usable.}
#'   \item{`gpukeras_error_profiler`}{The profiler cannot trace: one is
#'     already running, or the backend has none ([gpu_profile()]).}
#' }
#'
#' @section Training:
#' \describe{
#'   \item{`gpukeras_error_backup_mismatch`}{`backup_dir` holds a backup this
#'     [gpu_fit()] call cannot resume (another run's, or an unreadable one).}
#'   \item{`gpukeras_error_backup_in_use`}{Another fit (a background job, another R
#'     session) holds `backup_dir`: each fit locks its backup folder for its life, since
#'     two would resume from and delete each other's backups. The message names the
#'     process.}
#'   \item{`gpukeras_error_backup_dir_unsafe`}{`backup_dir` is another user's
#'     folder, or one other users may write to.}
#'   \item{`gpukeras_error_backup_write`}{A backup could not be written during
#'     training (a full disk, a quota, no permission).}
#'   \item{`gpukeras_error_callback`}{A Keras callback the user gave failed
#'     during training.}
#'   \item{`gpukeras_error_preempted`}{Training stopped at a signal
#'     [gpu_fit()] was told to handle (`signals`), after backing up that step.}
#' }
#'
#' @section Background jobs:
#' \describe{
#'   \item{`gpukeras_error_not_carriable`}{Something given to
#'     `gpu_fit(background = TRUE)` cannot be carried to the child process (a
#'     multi-worker strategy, a dataset not made by [gpu_dataset()], a `map`
#'     function).}
#'   \item{`gpukeras_error_job_failed`}{The training child failed more often
#'     than `max_restarts` allows ([gpu_job_wait()]); an error in the training
#'     itself is raised again with its own class instead.}
#'   \item{`gpukeras_error_job_write`}{A background job's folder (in
#'     [tempdir()]) could not be written: its disk is full (or a quota is
#'     reached). Raised by `gpu_fit(background = TRUE)` while it carries the
#'     model and data, and by [gpu_job_wait()] (also a
#'     `gpukeras_error_job_failed` then) when the disk fills up under a running
#'     job, which is not restarted. The message names the file and the folder,
#'     the condition's `folder` holds it.}
#'   \item{`gpukeras_error_job_timeout`}{[gpu_job_wait()] reached its
#'     `timeout`; the job keeps running.}
#'   \item{`gpukeras_error_job_cancelled`}{[gpu_job_wait()] on a job that
#'     [gpu_job_cancel()] stopped.}
#' }
#'
#' @section Several workers:
#' \describe{
#'   \item{`gpukeras_error_strategy`}{A multi-worker cluster cannot be set up
#'     as asked: workers that do not join, a port in use, a `TF_CONFIG`
#'     gpukeras cannot train with ([gpu_strategy()], [gpu_fit()]).}
#'   \item{`gpukeras_error_worker_lost`}{Multi-worker training, or a
#'     [gpu_launch()] worker, stopped because a worker died, hung up or failed.}
#'   \item{`gpukeras_error_network_exposed`}{Training ports would be open to
#'     other hosts: TensorFlow's servers listen on every interface, without
#'     authentication (see `trusted_network` in [gpu_strategy()]).}
#'   \item{`gpukeras_error_launch`}{[gpu_launch()] cannot start its workers:
#'     no private network can be made, or no free ports.}
#'   \item{`gpukeras_error_timeout`}{[gpu_launch()]'s workers did not finish
#'     within `timeout`.}
#' }
#'
#' @section Many models:
#' \describe{
#'   \item{`gpukeras_error_cv_fold`}{A fold of [gpu_cv()] failed in its worker
#'     process; the message says which and why, and the class of the worker's
#'     own error comes first (`gpukeras_error_worker_lost` when the worker
#'     process died, `gpukeras_error_out_of_memory`, ...).}
#'   \item{`gpukeras_error_search_trial`}{The first trial of [gpu_search()] to
#'     end failed with an error every trial would meet (a bug in `model_fn`, an
#'     `objective` the logs lack), before any trial completed: the search
#'     stops. A trial's own failure (its worker killed, out of memory, a NaN
#'     loss) does not stop it.}
#'   \item{`gpukeras_error_search_mismatch`}{The storage given to
#'     [gpu_search()] holds a study of another search (another space, model
#'     function, objective, data or `...`): resume it with its own call, or
#'     give another `storage` or `study`.}
#'   \item{`gpukeras_error_search_storage`}{The study's storage cannot be
#'     opened: a database that does not answer, or a driver that is not
#'     installed (`install_gpukeras(extras = "postgresql")`).}
#'   \item{`gpukeras_error_search_storage_unsafe`}{The folder given as
#'     [gpu_search()]'s `storage` is another user's, or one other users may
#'     write to, or its `search.journal`, `search.db` or `models` is a link: its owner could swap
#'     the study or the best model [gpu_load()] later loads. The message names
#'     the folder and what to do.}
#' }
#'
#' @section Tracking:
#' \describe{
#'   \item{`gpukeras_error_tracking`}{The tracking store cannot be read
#'     ([gpu_runs()], [gpu_compare_runs()], `gpu_load("runs:/<id>")`: a server
#'     that does not answer, refused credentials) or opened ([gpu_track()]: a
#'     folder MLflow cannot make its store in, a URI it refuses). The URI is
#'     masked; training itself never fails for tracking.}
#'   \item{`gpukeras_error_tracking_missing`}{MLflow's client is not installed
#'     in gpukeras' Python: `install_gpukeras(extras = "tracking")`.}
#' }
#'
#' @section Serving:
#' \describe{
#'   \item{`gpukeras_error_package_missing`}{A function needs an R package the
#'     package only suggests, and it is not installed (plumber for
#'     [gpu_serve()] and [gpu_api()]); the condition's `package` names it.}
#'   \item{`gpukeras_error_port_in_use`}{[gpu_serve()] cannot listen on its
#'     `host` and `port`: something else listens there, the address is not
#'     this machine's, or the port needs privileges. Raised before serving.}
#'   \item{`gpukeras_error_serve_server`}{The service's server (the Python
#'     process that listens on its port) did not start or ended; the message
#'     gives the last lines it wrote.}
#' }
#' A request a running service refuses is not an R condition: the client gets
#' a 4xx status with a JSON message (see [gpu_serve()]'s "Bad requests").
#'
#' @section Warnings:
#' Warnings are [rlang][rlang::warn] warnings of class
#' `c("gpukeras_warning_<what>", "gpukeras_warning", "rlang_warning",
#' "warning", "condition")`.
#' \describe{
#'   \item{`gpukeras_warning_output_precision`}{A mixed-precision model's
#'     output layer computes in float16 or bfloat16 ([gpu_precision_check()]
#'     and [gpu_fit()]); once per model.}
#'   \item{`gpukeras_warning_labels`}{[gpu_fit()] trains with
#'     `binary_crossentropy` on labels outside 0 and 1, to a loss that means
#'     nothing (Keras does not check).}
#'   \item{`gpukeras_warning_empty_levels`}{The training labels are a factor
#'     with levels no row has ([gpu_dataset()] and the verbs that train, R
#'     data): the levels are kept as R's factor has them, so the model's output
#'     needs a unit per level (a model of another width is a
#'     `gpukeras_error_bad_data` before training) and [predict()] gives each a
#'     column. `droplevels(y)` trains without them. The same for a training
#'     image folder's class folders without images.}
#'   \item{`gpukeras_warning_not_applied`}{A [gpu_setup()] setting the backend
#'     cannot apply (threads on JAX).}
#'   \item{`gpukeras_warning_input_exhausted`, `gpukeras_warning_python`}{A
#'     warning Python's frameworks (Keras, TensorFlow, JAX) gave during a
#'     gpukeras call, raised in R instead of printed on stderr with a path into
#'     site-packages: one gpukeras understands in its words (Keras' "Your input
#'     ran out of data": training stopped early), any other as
#'     "<category> from <package>: <message>".}
#'   \item{`gpukeras_warning_batch_size`}{`batch_size` is larger than the
#'     training rows ([gpu_fit()] with R data, [gpu_dataset()] where the rows
#'     are known, after its validation split): the batch is the rows, one
#'     batch per epoch.}
#'   \item{`gpukeras_warning_accumulation`}{[gpu_fit()] with `accumulate`:
#'     an epoch's micro-batches are not a whole number of updates, so the last
#'     ones join the next epoch's first update.}
#'   \item{`gpukeras_warning_backend_ignored`}{[gpu_setup()] found
#'     `KERAS_BACKEND` naming another backend than the one in use: it was set
#'     after Python started, and Keras reads it only when it starts.
#'     [gpu_check()] lists the same among its reasons.}
#'   \item{`gpukeras_warning_signal`}{[gpu_fit()] handled a signal after
#'     training completed: the result is complete, and the signal is reported.}
#'   \item{`gpukeras_warning_serve_open`}{[gpu_serve()] listens on another
#'     address than loopback without a `token`: anyone who can reach the port
#'     can use the service.}
#'   \item{`gpukeras_warning_tracking`}{The tracking store did not take a
#'     run's records (it did not answer, answered too slowly, or refused the
#'     credentials; [gpu_track()] and every tracked [gpu_fit()], [gpu_cv()] and
#'     [gpu_search()]): training went on, what was not sent is kept, and
#'     [gpu_track_sync()] sends it. Said once a session until the store takes
#'     runs again; credentials are never in the message.}
#'   \item{`gpukeras_warning_load_hook`}{Another package's reticulate load
#'     hook, held back while [gpu_setup()] applied its settings, failed when
#'     it ran afterwards.}
#' }
#'
#' @name gpukeras-conditions
#' @aliases gpukeras_error gpukeras_warning
#' @examples
#' error <- tryCatch(gpu_dataset(matrix(1:4, 2), batch_size = 0), error = identity)
#' class(error)
#' conditionCall(error)
#' tryCatch(
#'   lr_exponential(0.01, decay_steps = 0, decay_rate = 0.9),
#'   gpukeras_error_bad_argument = function(e) conditionMessage(e)
#' )
NULL
