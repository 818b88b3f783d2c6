"""gpu_search()'s trials as populations (JAX) on a real SQLite study, against each trial
refitted alone with its seed.

Run by test_population_search.py as ``python population_search.py '<json spec>'`` (JAX
backend, the core on PYTHONPATH); the spec's ``folder`` holds the studies. Prints one JSON
line:

- ``shapes``: four trials, units 8, 16, 8, 16 and their own learning rates, validated on
  held-out rows: ``groups`` (search_population's), ``values`` (the study's objective of
  each), ``refit`` (each trial's val_loss at its last epoch, gpu_fit() of its parameters
  alone with its seed), ``states``;
- ``epochs``: three trials that drew their own epochs (1, 3, 2), one population;
- ``stopped``: after five trials the median pruner judges by (val_loss 0.5 at every epoch),
  three members with learning rates 0 (pruned after its first epoch), 0.05 (completes) and
  1e30 (its loss turns NaN: it fails): ``states``, ``reasons``, ``epochs`` and ``values`` of
  the three, ``stored`` (their states in the study before the session told them: the
  pruned one told by the worker), ``devices`` (recorded with each), and ``refit``, the
  completed one refitted alone;
- ``compiled``: a search (units 12) asking 4 trials a batch whose budget (6) leaves 2 for
  its second batch, with the persistent compilation cache a worker has (``compile_cache``):
  each batch's ``widths`` and ``misses`` (compilations not found in the cache: JAX's
  monitoring events), the second batch's ``states``, ``values`` and ``refit``;
- ``split``: three trials of one shape where no two fit the memory
  (``cv_population.MEMORY_SHARE`` tiny): ``groups`` and ``states``.
"""

import json
import sys

import numpy as np

from gpukeras import bridge
from gpukeras.core import compile_cache
from gpukeras.core.runtime import config
from gpukeras.search import search, search_trial
from gpukeras.tools import cv_population

spec = json.loads(sys.argv[1])
compile_cache.choose(f"{spec['folder']}/compiled", -1)  # before anything compiles, as a worker
events: dict[str, int] = {}
config.backend_module().monitoring.register_event_listener(
    lambda event, **_: events.update({event: events.get(event, 0) + 1})
)
keras = config.keras()
url = f"sqlite:///{spec['folder']}/studies.db"
rng = np.random.default_rng(2)
x = rng.standard_normal((600, 8)).astype("float32")
y = (x[:, 0] + 0.3 * x[:, 1] > 0).astype("int32")
order = rng.permutation(600)
train_rows, held = np.sort(order[:470]), np.sort(order[470:])
EPOCHS, SIZE = 3, 32


def answer(verb: str, kwargs: dict) -> object:
    done = bridge.call(verb, kwargs)
    assert done["ok"], done
    return done["value"]


def made(params: dict, seed: int):
    """A trial's model as its worker makes it: its seed, then model_fn(params)."""
    answer("workers_seed", {"seed": seed})
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(int(params.get("units", 8)), activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    return model


def opened(name: str, space: dict, pruner: str, trials: int = 20) -> search.Search:
    return answer(
        "search_open",
        {
            "storage": url,
            "study": name,
            "space": space,
            "request": {},
            "trials": trials,
            "objective": "val_loss",
            "sampler": "random",
            "pruner": pruner,
            "batch": True,
        },
    )


def population(
    study: search.Search, name: str, pruner: str, n: int, fit: tuple = ("learning_rate",)
) -> tuple[dict, list]:
    """Ask ``n`` trials (a batch of width ``n``), train them as populations (``fit``: the
    drawn values that are gpu_fit()'s), tell them: search_population's answer (with
    ``stored``, the trials' states in the study before the session told them) and the told
    outcomes."""
    batch = answer("search_population_ask", {"search": study, "n": n})
    asked = batch["trials"]
    trained = answer(
        "search_population",
        {
            "models": [made(trial["params"], trial["seed"]) for trial in asked],
            "x": x,
            "y": y,
            "members": [
                {
                    "number": t["number"],
                    "trial_id": t["trial_id"],
                    "seed": t["seed"],
                    "fit": {key: t["params"][key] for key in fit},
                }
                for t in asked
            ],
            "rows": train_rows,
            "validation_rows": held,
            "storage": url,
            "study": name,
            "objective": "val_loss",
            "pruner": pruner,
            "epochs": EPOCHS,
            "batch_size": SIZE,
            "width": batch["width"],
            "device": "CPU",
        },
    )
    trained["stored"] = [study.study.trials[t["number"]].state.name for t in asked]
    told = answer("search_population_tell", {"search": study, "trials": trained["trials"]})
    return trained, list(zip(asked, told))


def refit(trial: dict) -> float:
    """The trial's val_loss at its last epoch, gpu_fit() of its parameters alone (its own
    ``epochs`` where it drew them)."""
    fit = answer(
        "fit",
        {
            "model": made(trial["params"], trial["seed"]),
            "data": (x[train_rows], y[train_rows]),
            "validation_data": (x[held], y[held]),
            "seed": trial["seed"],
            "learning_rate": trial["params"]["learning_rate"],
            "epochs": trial["params"].get("epochs", EPOCHS),
            "batch_size": SIZE,
            "verbose": 0,
        },
    )
    return fit["history"]["val_loss"][-1]


rate = {"type": "float", "lower": 1e-4, "upper": 0.1, "log": True}
units = {"type": "choice", "choices": [8, 16]}
shapes = opened("shapes", {"units": units, "learning_rate": rate}, "none")
for u, lr in ((8, 0.01), (16, 0.02), (8, 0.03), (16, 0.005)):
    shapes.study.enqueue_trial({"units": u, "learning_rate": lr})
trained, told = population(shapes, "shapes", "none", 4)
result = {
    "shapes": {
        "groups": trained["groups"],
        "states": [t["state"] for _, t in told],
        "values": [t["value"] for _, t in told],
        "refit": [refit(trial) for trial, _ in told],
        "save": [t["save"] for t in trained["trials"]],
    }
}

# epochs searched: each member trains its own, as its fit alone would
own_epochs = opened(
    "epochs", {"learning_rate": rate, "epochs": {"type": "choice", "choices": [1, 2, 3]}}, "none"
)
for lr, epochs in ((0.01, 1), (0.02, 3), (0.03, 2)):
    own_epochs.study.enqueue_trial({"learning_rate": lr, "epochs": epochs})
trained, told = population(own_epochs, "epochs", "none", 3, ("learning_rate", "epochs"))
result["epochs"] = {
    "groups": trained["groups"],
    "epochs": [t["epochs"] for _, t in told],
    "trained": [len(t["history"]["epoch"]) for t in trained["trials"]],
    "values": [t["value"] for _, t in told],
    "refit": [refit(trial) for trial, _ in told],
}

rates = {"type": "choice", "choices": [0.0, 0.01, 0.05, 1e30]}
stopped = opened("stopped", {"learning_rate": rates}, "median")
for _ in range(5):
    stopped.study.enqueue_trial({"learning_rate": 0.01})
    trial = search.ask(stopped)
    assert trial is not None
    reporter = search_trial.reporters(url, "stopped", [trial["trial_id"]], "val_loss", "median")[0]
    for epoch in range(EPOCHS):
        reporter.epoch_end(epoch, {"val_loss": 0.5})
    search.tell(stopped, trial["number"], {"pruning": reporter.outcome()})
for lr in (0.0, 0.05, 1e30):
    stopped.study.enqueue_trial({"learning_rate": lr})
trained, told = population(stopped, "stopped", "median", 3)
result["stopped"] = {
    "groups": trained["groups"],
    "stored": trained["stored"],
    "devices": answer("search_trials", {"search": stopped})["device"][-3:],
    "states": [t["state"] for _, t in told],
    "reasons": [t["reason"] for _, t in told],
    "epochs": [t["epochs"] for _, t in told],
    "values": [t["value"] for _, t in told],
    "refit": refit(told[1][0]),
    "save": [t["save"] for t in trained["trials"]],
}

MISSES = "/jax/compilation_cache/cache_misses"
# units 12: an architecture no earlier part compiled
only_12 = {"type": "choice", "choices": [12]}
compiled = opened("compiled", {"units": only_12, "learning_rate": rate}, "none", trials=6)
result["compiled"] = {"widths": [], "misses": []}
for _ in range(2):
    before = events.get(MISSES, 0)
    trained, told = population(compiled, "compiled", "none", 4)
    result["compiled"]["misses"].append(events.get(MISSES, 0) - before)
    result["compiled"]["widths"].append(trained["widths"])
result["compiled"].update(
    states=[t["state"] for _, t in told],
    values=[t["value"] for _, t in told],
    refit=[refit(trial) for trial, _ in told],
)

cv_population.MEMORY_SHARE = 1e-12  # no two members fit: the batch is split to one each
split = opened("split", {"learning_rate": rate}, "none")
trained, told = population(split, "split", "none", 3)
result["split"] = {"groups": trained["groups"], "states": [t["state"] for _, t in told]}
print(json.dumps(result))
