# Bad inputs to the session functions: gpu_check(), gpu_setup(), gpu_devices(),
# with_gpu_device()/local_gpu_device(), gpu_strategy(), with_gpu_strategy().
# Each row must fail with a classed error whose message says what to do (see
# helper-bad-input.R); the first table before Python starts.

# nolint start: line_length_linter. One case a row, its columns aligned.
checked <- check_before_python(bad_inputs(
  ~name,                                   ~code,                                                          ~class,         ~message,
  "gpu_check: probe not a flag",           gpu_check(probe = "yes"),                                       "bad_argument", "^`probe` must be TRUE or FALSE, not `yes`",
  "gpu_check: probe NULL",                 gpu_check(probe = NULL),                                        "bad_argument", "^`probe` must be TRUE or FALSE, not NULL",
  "gpu_check: probe_seconds zero",         gpu_check(probe_seconds = 0),                                   "bad_argument", "^`probe_seconds` must be one positive number",
  "gpu_check: probe_seconds NA",           gpu_check(probe_seconds = NA),                                  "bad_argument", "^`probe_seconds` must be one positive number, not `NA`",
  "gpu_check: probe_seconds a string",     gpu_check(probe_seconds = "3"),                                 "bad_argument", "^`probe_seconds` must be one positive number",
  "gpu_check: probe_seconds Inf",          gpu_check(probe_seconds = Inf),                                 "bad_argument", "^`probe_seconds` must be one positive number, not `Inf`",
  "gpu_check: probe_seconds huge",         gpu_check(probe_seconds = 1e12),                                "bad_argument", "^`probe_seconds` must be at most 600",
  "gpu_check: fix NA",                     gpu_check(fix = NA),                                            "bad_argument", "^`fix` must be TRUE or FALSE, not `NA`",
  "gpu_check: fix a string",               gpu_check(fix = "yes"),                                         "bad_argument", "^`fix` must be TRUE or FALSE, not `yes`",
  "gpu_setup: memory_growth NA",           gpu_setup(memory_growth = NA),                                  "bad_argument", "^`memory_growth` must be TRUE or FALSE, not `NA`",
  "gpu_setup: memory_growth NULL",         gpu_setup(memory_growth = NULL),                                "bad_argument", "^`memory_growth` must be TRUE or FALSE, not NULL",
  "gpu_setup: memory_limit zero",          gpu_setup(memory_limit = 0),                                    "bad_argument", "^`memory_limit` must be positive numbers, not `0`",
  "gpu_setup: memory_limit negative",      gpu_setup(memory_limit = c(100, -1)),                           "bad_argument", "^`memory_limit` must be positive numbers",
  "gpu_setup: memory_limit NA",            gpu_setup(memory_limit = NA),                                   "bad_argument", "^`memory_limit` must be positive numbers, not `NA`",
  "gpu_setup: memory_limit a string",      gpu_setup(memory_limit = "1024"),                               "bad_argument", "^`memory_limit` must be positive numbers",
  "gpu_setup: memory_limit Inf",           gpu_setup(memory_limit = Inf),                                  "bad_argument", "^`memory_limit` must be positive numbers, not `Inf`",
  "gpu_setup: mixed_precision unknown",    gpu_setup(mixed_precision = "float8"),                          "bad_argument", "^`mixed_precision` must be one of \"auto\", \"float16\", \"bfloat16\", \"float32\"",
  "gpu_setup: mixed_precision NA",         gpu_setup(mixed_precision = NA),                                "bad_argument", "^`mixed_precision` must be one of",
  "gpu_setup: mixed_precision two",        gpu_setup(mixed_precision = c("float16", "float32")),           "bad_argument", "^`mixed_precision` must be one of .* not a character of length 2",
  "gpu_setup: threads negative",           gpu_setup(threads = -1),                                        "bad_argument", "^`threads` must be one count or c\\(intra = , inter = \\)",
  "gpu_setup: threads fractional",         gpu_setup(threads = 1.5),                                       "bad_argument", "^`threads` must be one count .* not `1.5`",
  "gpu_setup: threads three",              gpu_setup(threads = c(1, 2, 3)),                                "bad_argument", "^`threads` must be one count",
  "gpu_setup: threads a string",           gpu_setup(threads = "2"),                                       "bad_argument", "^`threads` must be one count",
  "gpu_setup: threads NA",                 gpu_setup(threads = NA),                                        "bad_argument", "^`threads` must be one count",
  "gpu_setup: threads huge",               gpu_setup(threads = 1e12),                                      "bad_argument", "^`threads` must be one count .* from 0 to 4096",
  "gpu_setup: threads badly named",        gpu_setup(threads = c(a = 1, b = 2)),                           "bad_argument", "^`threads` names must be `intra` and `inter`",
  "gpu_setup: jit_compile a word",         gpu_setup(jit_compile = "yes"),                                 "bad_argument", "^`jit_compile` must be TRUE, FALSE or \"auto\", not `yes`",
  "gpu_setup: jit_compile NA",             gpu_setup(jit_compile = NA),                                    "bad_argument", "^`jit_compile` must be TRUE, FALSE or \"auto\"",
  "gpu_setup: cpu_devices zero",           gpu_setup(cpu_devices = 0),                                     "bad_argument", "^`cpu_devices` must be one whole number >= 1, not `0`",
  "gpu_setup: cpu_devices fractional",     gpu_setup(cpu_devices = 2.5),                                   "bad_argument", "^`cpu_devices` must be one whole number >= 1",
  "gpu_setup: cpu_devices huge",           gpu_setup(cpu_devices = 1e9),                                   "bad_argument", "^`cpu_devices` must be one whole number >= 1, not `1e\\+09`",
  "gpu_setup: devices of an unknown kind", gpu_setup(devices = "TPU:0"),                                   "bad_argument", "^`devices` must be GPU indices .*gpu_devices\\(\\) lists the devices",
  "gpu_setup: devices NA",                 gpu_setup(devices = NA),                                        "bad_argument", "^`devices` must be GPU indices",
  "gpu_setup: devices negative",           gpu_setup(devices = -1),                                        "bad_argument", "^`devices` must be GPU indices",
  "gpu_setup: devices fractional",         gpu_setup(devices = 1.5),                                       "bad_argument", "^`devices` must be GPU indices",
  "gpu_setup: devices a list",             gpu_setup(devices = list("GPU:0")),                             "bad_argument", "^`devices` must be GPU indices .* not a list",
  "gpu_setup: deterministic a word",       gpu_setup(deterministic = "yes", seed = 1),                     "bad_argument", "^`deterministic` must be TRUE or FALSE, not `yes`",
  "gpu_setup: deterministic NA",           gpu_setup(deterministic = NA, seed = 1),                        "bad_argument", "^`deterministic` must be TRUE or FALSE, not `NA`",
  "gpu_setup: deterministic two",          gpu_setup(deterministic = c(TRUE, TRUE), seed = 1),             "bad_argument", "^`deterministic` must be TRUE or FALSE, not a logical of length 2",
  "gpu_setup: seed negative",              gpu_setup(seed = -1),                                           "bad_argument", "^`seed` must be one whole number >= 0, not `-1`",
  "gpu_setup: workers_ahead negative",     gpu_setup(workers_ahead = -1),                                  "bad_argument", "^`workers_ahead` must be \"auto\" or one whole number >= 0, not `-1`",
  "gpu_setup: workers_ahead a word",       gpu_setup(workers_ahead = "all"),                               "bad_argument", "^`workers_ahead` must be \"auto\" or one whole number >= 0, not `all`",
  "gpu_setup: workers_ahead TRUE",         gpu_setup(workers_ahead = TRUE),                                "bad_argument", "^`workers_ahead` must be \"auto\" or one whole number >= 0, not `TRUE`",
  "gpu_setup: workers_ahead fractional",   gpu_setup(workers_ahead = 1.5),                                 "bad_argument", "^`workers_ahead` must be \"auto\" or one whole number >= 0",
  "gpu_setup: seed a string",              gpu_setup(deterministic = TRUE, seed = "1"),                    "bad_argument", "^`seed` must be one whole number >= 0",
  "with_gpu_device: two devices",          with_gpu_device(c("CPU:0", "CPU:1"), 1),                        "bad_argument", "^`device` must be one device, not a character of length 2",
  "with_gpu_device: no device",            with_gpu_device(character(), 1),                                "bad_argument", "^`device` must be one device",
  "with_gpu_device: NULL",                 with_gpu_device(NULL, 1),                                       "bad_argument", "^`device` must be one device, not NULL",
  "with_gpu_device: unknown kind",         with_gpu_device("TPU:0", 1),                                    "bad_argument", "^`device` must be GPU indices .* not `TPU:0`",
  "with_gpu_device: negative index",       with_gpu_device(-1, 1),                                         "bad_argument", "^`device` must be GPU indices",
  "with_gpu_device: a list",               with_gpu_device(list("CPU:0"), 1),                              "bad_argument", "^`device` must be GPU indices",
  "local_gpu_device: NA",                  local_gpu_device(NA),                                           "bad_argument", "^`device` must be GPU indices .* not `NA`",
  "gpu_strategy: type unknown",            gpu_strategy("ring"),                                           "bad_argument", "^`type` must be one of \"auto\", \"one_device\", \"mirrored\", \"multi_worker\", not `ring`",
  "gpu_strategy: type NA",                 gpu_strategy(type = NA),                                        "bad_argument", "^`type` must be one of",
  "gpu_strategy: type a number",           gpu_strategy(type = 1),                                         "bad_argument", "^`type` must be one of",
  "gpu_strategy: devices unknown kind",    gpu_strategy(devices = "TPU:0"),                                "bad_argument", "^`devices` must be GPU indices",
  "gpu_strategy: devices NA",              gpu_strategy(devices = NA),                                     "bad_argument", "^`devices` must be GPU indices",
  "gpu_strategy: worker without port",     gpu_strategy("multi_worker", workers = c("localhost", "b:1")),  "bad_argument", "^`workers` must be \"host:port\" strings",
  "gpu_strategy: workers NA",              gpu_strategy("multi_worker", workers = NA),                     "bad_argument", "^`workers` must be \"host:port\" strings",
  "gpu_strategy: no workers",              gpu_strategy("multi_worker", workers = character()),            "bad_argument", "^`workers` must be \"host:port\" strings",
  "gpu_strategy: index negative",          gpu_strategy("multi_worker", workers = "a:1", index = -1),      "bad_argument", "^`index` must be one whole number >= 0",
  "gpu_strategy: index fractional",        gpu_strategy("multi_worker", workers = "a:1", index = 1.5),     "bad_argument", "^`index` must be one whole number >= 0",
  "gpu_strategy: index past the workers",  gpu_strategy("multi_worker", workers = c("a:1", "b:2"), index = 2), "bad_argument", "^`index` is 2, but `workers` names 2 worker\\(s\\).* from 0 to 1",
  "with_gpu_strategy: NULL",               with_gpu_strategy(NULL, 1),                                     "bad_argument", "^`strategy` must be a gpu_strategy\\(\\)",
  "with_gpu_strategy: a type name",        with_gpu_strategy("mirrored", 1),                               "bad_argument", "^`strategy` must be a gpu_strategy\\(\\) .* not `mirrored`",
  "with_gpu_strategy: a list",             with_gpu_strategy(list(), 1),                                   "bad_argument", "^`strategy` must be a gpu_strategy\\(\\)"
))
# nolint end

for (result in checked) {
  test_that(paste(result$case$name, "(before Python starts)"), {
    expect_bad_input(result$error, result$case)
    expect_false(result$started_python, label = paste(deparse(result$case$code), collapse = " "))
  })
}

test_that("the messages for gpu_setup(workers_ahead = )", {
  # Refused in R, before Python starts or a worker is started.
  expect_snapshot(error = TRUE, {
    gpu_setup(workers_ahead = -1)
    gpu_setup(workers_ahead = c(1, 2))
  })
})

test_that("the messages for gpu_setup(deterministic = ) (issue #33, item 5)", {
  # Refused in R, before Python starts.
  expect_snapshot(error = TRUE, {
    gpu_setup(deterministic = "yes", seed = 1)
    gpu_setup(deterministic = NA, seed = 1)
  })
})

# Cases that need the runtime: it is started first, so the settings that only
# work before it starts are asked for in the wrong order.
skip_if_no_python()
gpu_devices()
numpy <- reticulate::import("numpy", convert = FALSE)
not_a_strategy <- numpy$zeros(2L)
model <- tiny_model()
scoped <- function(device) {
  local_gpu_device(device)
  "not reached"
}

# nolint start: line_length_linter. One case a row, its columns aligned.
cases <- bad_inputs(
  ~name,                                              ~code,                                                          ~class,             ~message,
  "gpu_setup: threads after the runtime started",     gpu_setup(threads = 13, mixed_precision = "float32"),           "runtime_started",  "already started .*threads \\(intra-op\\): asked 13.*Restart R and call gpu_setup\\(\\) first",
  "gpu_setup: cpu_devices after the runtime started", gpu_setup(cpu_devices = 7, mixed_precision = "float32"),        "runtime_started",  "cpu_devices: asked 7.*Restart R and call gpu_setup\\(\\) first",
  "gpu_setup: a GPU that does not exist",             gpu_setup(devices = "GPU:99", mixed_precision = "float32"),     "unknown_device",   "No such device: GPU:99\\. Devices here: .*CPU:0.*gpu_devices\\(\\) lists them",
  "gpu_setup: a CPU device that does not exist",      gpu_setup(devices = "CPU:99", mixed_precision = "float32"),     "unknown_device",   "No such device: CPU:99",
  "gpu_setup: memory_limit with memory_growth",       gpu_setup(memory_limit = 1e12, memory_growth = TRUE),           "bad_argument",     "cannot be combined .*Pass memory_growth = FALSE with memory_limit",
  "with_gpu_device: a GPU that does not exist",       with_gpu_device("GPU:99", 1),                                   "unknown_device",   "^No such device: 'GPU:99'\\. Devices here: .*gpu_devices\\(\\) lists them",
  "with_gpu_device: a GPU index that does not exist", with_gpu_device(99, 1),                                         "unknown_device",   "^No such device: 'GPU:99'",
  "local_gpu_device: a CPU that does not exist",      scoped("CPU:99"),                                               "unknown_device",   "^No such device: 'CPU:99'",
  "gpu_strategy: a GPU that does not exist",          gpu_strategy(devices = "GPU:99"),                               "unknown_device",   "No such device: GPU:99.*gpu_setup\\(cpu_devices = \\)",
  "gpu_strategy: a device named twice",               gpu_strategy("mirrored", devices = c("CPU:0", "CPU:0")),        "bad_argument",     "devices name a device twice",
  "gpu_strategy: workers for one device",             gpu_strategy("one_device", workers = "localhost:1", index = 0), "bad_argument",     "workers and index are for type = \"multi_worker\"",
  "gpu_strategy: multi_worker without workers",     withr::with_envvar(c(TF_CONFIG = NA, SLURM_PROCID = NA, OMPI_COMM_WORLD_RANK = NA), gpu_strategy("multi_worker")), "strategy", "No workers were given, and neither TF_CONFIG nor a SLURM or Open MPI job .* describes a cluster: give every worker's address",
  "gpu_strategy: multi_worker after the runtime started", gpu_strategy("multi_worker", workers = c("localhost:1", "localhost:2"), index = 0), "runtime_started", "already started.*Restart R and call gpu_strategy\\(\\) first",
  "with_gpu_strategy: a NumPy array",                 with_gpu_strategy(not_a_strategy, 1),                           "bad_argument",     "strategy must come from gpu_strategy\\(\\)",
  "with_gpu_strategy: a model",                       with_gpu_strategy(model, 1),                                    "bad_argument",     "strategy must come from gpu_strategy\\(\\) .*not a keras"
)
# nolint end

for (case in cases) {
  test_that(case$name, {
    expect_bad_input(run_bad_input(case), case)
  })
}

# Cases in a scheduler's environment: gpu_strategy("multi_worker") without
# workers reads the cluster from variables that Python copies when it starts,
# so each case runs in a fresh R that sets them (withr::local_envvar()) before
# anything starts Python. The error comes before a framework is imported.
slurm_step <- c(
  TF_CONFIG = NA, SLURM_PROCID = "0", SLURM_NTASKS = "2", SLURM_JOB_NODELIST = "n[1-2]",
  SLURM_TASKS_PER_NODE = "1(x2)", SLURM_STEP_NUM_TASKS = NA, SLURM_STEP_NODELIST = NA,
  SLURM_STEP_TASKS_PER_NODE = NA, GPUKERAS_PORT_BASE = NA, OMPI_COMM_WORLD_RANK = NA
)
open_mpi_ranks <- c(
  TF_CONFIG = NA, SLURM_PROCID = NA, OMPI_COMM_WORLD_RANK = "0", OMPI_COMM_WORLD_SIZE = "2",
  OMPI_COMM_WORLD_LOCAL_SIZE = "2", GPUKERAS_PORT_BASE = NA
)

# Evaluate `code` in a fresh R whose environment is `environment` with the
# variables in `...` changed, and raise its error here, with `frameworks`: those
# Python had imported by then.
in_environment <- function(code, environment, ...) {
  changed <- c(...)
  environment[names(changed)] <- changed
  result <- do.call(run_in_fresh_r, list(expr = bquote({
    withr::local_envvar(.(environment))
    list(
      error = catch_error(.(substitute(code))),
      frameworks = unlist(reticulate::py_eval(
        "sorted(set(__import__('sys').modules) & {'tensorflow', 'keras', 'jax', 'torch'})"
      ))
    )
  })))
  if (!is.null(result$error)) {
    stop(structure(
      class = result$error$class,
      list(message = result$error$message, call = NULL, python_traceback = result$error$python_traceback,
           frameworks = as.character(result$frameworks))
    ))
  }
  invisible()
}

# nolint start: line_length_linter. One case a row, its columns aligned.
cases <- bad_inputs(
  ~name,                                              ~code,                                                                                      ~class,         ~message,
  "gpu_strategy: SLURM_PROCID not a number",          in_environment(gpu_strategy("multi_worker"), slurm_step, SLURM_PROCID = "abc"),             "bad_argument", "^SLURM_PROCID is 'abc'; it must be a whole number >= 0 \\(this task's rank; srun sets it\\)",
  "gpu_strategy: SLURM_NTASKS not a number",          in_environment(gpu_strategy("multi_worker"), slurm_step, SLURM_NTASKS = "two"),             "bad_argument", "^SLURM_NTASKS is 'two'; it must be a whole number from 1 to 65536",
  "gpu_strategy: SLURM node list of a billion hosts", in_environment(gpu_strategy("multi_worker"), slurm_step, SLURM_JOB_NODELIST = "n[1-999999999]"), "bad_argument", "^SLURM_JOB_NODELIST is 'n\\[1-999999999\\]'; it names 999999999 hosts, more than 4096",
  "gpu_strategy: GPUKERAS_PORT_BASE not a number",    in_environment(gpu_strategy("multi_worker"), slurm_step, GPUKERAS_PORT_BASE = "http"),      "bad_argument", "^GPUKERAS_PORT_BASE is 'http'; it must be a whole number from 1 to 65535",
  "gpu_strategy: OMPI_COMM_WORLD_RANK not a number",  in_environment(gpu_strategy("multi_worker"), open_mpi_ranks, OMPI_COMM_WORLD_RANK = "x"),  "bad_argument", "^OMPI_COMM_WORLD_RANK is 'x'; it must be a whole number >= 0"
)
# nolint end

for (case in cases) {
  test_that(paste(case$name, "(in a fresh R)"), {
    error <- tryCatch(eval(case$code), error = identity)
    expect_bad_input(error_data(error), case)
    expect_identical(error$frameworks, character())
  })
}
