"""`TaskStore`: the task pool of one run, as the training loop uses it.

    store = TaskStore.open("store/run.sqlite", run="run", config=cfg.curriculum)
    added = store.add_tasks(tasks, Provenance("proposed", step, model_version, "proposer"),
                            verifications)                 # ids in input order, duplicates too
    refs = store.references(n_prompts, step)               # K diverse frontier tasks per prompt
    batch = store.sample(512, step)                        # a frontier batch for the solver
    store.selection(step)                                  # TraPO judgement of unlabeled tasks
    store.record_attempts(step, model_version, attempts)   # once per (task, step, version)
    store.estimates(ids, step); store.ability(step); store.stats(step)

Every write is one transaction: a task and its references, or a step's attempts and the
difficulty state they imply, appear together or not at all. Recording the same (task, step,
model version) twice changes nothing the second time, so a resumed run may replay a step.
One process writes a run at a time; readers (export, stats) may open the same store meanwhile.

The store owns its in-memory state (the `PoolIndex` of per-task numbers, the abilities, the
recorded (step, model version) keys, the trajectory window): the modules beside it are
functions that take what they need and return values, and only `TaskStore` changes that
state, after the database transaction that it mirrors has committed.

Labeled tasks (origin `labeled`) fill `curriculum.labeled_ratio` of each drawn batch when the
pool has any; with `curriculum.selection=trapo`, unlabeled tasks whose learning trajectory
does not follow the labeled ones' are not drawn. That judgement is `selfplay.semi`'s: whoever
opens the store hands it in (`selector`, e.g. `selfplay.semi.selection.select`); the store keeps
the trajectories it judges (`trajectories.py`) and applies its verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from selfplay.config import CurriculumConfig, SelfPlayConfig
from selfplay.curriculum import database, difficulty, reads, replay, sampler, writes
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.difficulty import Estimate
from selfplay.curriculum.migrations import ensure_schema, rebuild_pending
from selfplay.curriculum.pool import PoolIndex
from selfplay.curriculum.records import (
    ORIGINS,
    AddResult,
    PoolTask,
    Provenance,
    RecordResult,
    SolverBatch,
    TaskAttempts,
)
from selfplay.curriculum.trajectories import Trajectories, TrajectoryWindow
from selfplay.types import TASK_TYPES, Task, TaskType

#: judges the unlabeled tasks: (config, trajectories, which rows are labeled, step) -> a selection
#: with `rejected` (ids not to draw), `metrics()` and `records()` (`selfplay.semi.selection`)
Select = Callable[[CurriculumConfig, Trajectories, np.ndarray, int], object]


class TaskStore:
    """The task pool of one run; see the module docstring. Use `TaskStore.open`."""

    def __init__(
        self,
        engine,
        run_id: int,
        run: str,
        config: CurriculumConfig,
        answers: int,
        selector: Select | None = None,
    ):
        self._engine = engine
        self._run_id = run_id
        self._run = run
        self._config = config
        self._answers = answers  # answers a drawn task gets, which the sampler's shape weighs
        self._index = PoolIndex()
        self._abilities: dict[int, tuple[float, float, int]] = {}  # step -> theta, precision, n
        self._recorded: set[tuple[int, str]] = set()  # (step, model version) with attempts
        # (key, (p, attempted), positions of the attempted tasks) of the last solve_rates
        self._p_cache: tuple[tuple, tuple[np.ndarray, np.ndarray], np.ndarray] | None = None
        self._checkpointer = database.checkpointer(engine, config)
        self._trajectories = TrajectoryWindow(config.trapo_window)
        self._select = selector
        self._selection_cache: tuple[tuple, object] | None = None
        self._keyed: set[str] = set()  # the key columns no task lacks (`fill_keys`)

    # -- its state, read-only from outside: only the store changes it -------------------------

    @property
    def engine(self):
        """The SQLAlchemy engine of the pool's database."""
        return self._engine

    @property
    def run_id(self) -> int:
        return self._run_id

    @property
    def run(self) -> str:
        """The name of the run whose tasks the pool holds."""
        return self._run

    @property
    def config(self) -> CurriculumConfig:
        return self._config

    @property
    def answers(self) -> int:
        """Answers a drawn task gets (`selfplay.solver_samples`), which the sampler weighs."""
        return self._answers

    @property
    def index(self) -> PoolIndex:
        """The per-task numbers of the run, in memory (`PoolIndex`)."""
        return self._index

    @property
    def abilities(self) -> dict[int, tuple[float, float, int]]:
        """step -> (theta, precision, answers) of the solver's fitted ability."""
        return self._abilities

    @property
    def recorded(self) -> set[tuple[int, str]]:
        """The (step, model version) keys that have recorded attempts."""
        return self._recorded

    @property
    def trajectories(self) -> TrajectoryWindow:
        """The attempts of the last `trapo_window` steps, which the selection judges."""
        return self._trajectories

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: str | None = None,
        run: str | None = None,
        config: CurriculumConfig | None = None,
        *,
        create: bool = True,
        run_config: dict | None = None,
        answers: int = SelfPlayConfig.solver_samples,
        selector: Select | None = None,
    ) -> TaskStore:
        """Open (creating or migrating as needed) the pool of `run` in `store`.

        `store` is a SQLite file path or a database URL (default `config.store`); `run`
        defaults to `config.run`. With `create=False` a missing run is an error. A new run
        keeps `run_config` (the resolved configuration, as plain data) for provenance.
        `answers` is how many answers a drawn task gets, `selfplay.solver_samples`: the
        sampler's `azr` shape weighs tasks by it. `selector` judges unlabeled tasks by their
        trajectories (`selection`; `sample` applies it when `config.selection` is trapo).
        """
        config = config or CurriculumConfig()
        run = run or config.run
        engine = database.create(database.resolve_url(store or config.store, run), config)
        try:
            ensure_schema(engine)
            run_id = writes.find_or_create_run(engine, run, create, run_config)
        except BaseException:
            engine.dispose()
            raise
        self = cls(engine, run_id, run, config, answers, selector)
        if rebuild_pending(engine, run_id):  # a migration dropped its difficulty state
            replay.rebuild_estimates(engine, run_id, config)
        self.reload()
        return self

    @staticmethod
    def runs(store: str, config: CurriculumConfig | None = None) -> list[str]:
        """Names of the runs a store holds (none for a new store; a missing file stays so)."""
        return reads.run_names(store, config or CurriculumConfig())

    def reload(self) -> None:
        """Re-read the per-task state and abilities from the database."""
        self._index = reads.load_index(self._engine, self._run_id)
        self._keyed = set()  # asked again: another process may have added tasks without keys
        self._abilities, self._recorded = reads.abilities(self._engine, self._run_id)
        self._trajectories.load(self._engine, self._run_id)
        self._p_cache = None

    def close(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.close()
        self._engine.dispose()

    def __enter__(self) -> TaskStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __len__(self) -> int:
        return len(self._index)

    @property
    def last_step(self) -> int:
        """The latest step that produced a task, recorded an attempt or fitted an ability."""
        return max([self._index.max_step, *self._abilities.keys()])

    # -- writing ------------------------------------------------------------------------------

    def add_tasks(
        self,
        tasks: Sequence[Task],
        provenance: Provenance | Sequence[Provenance],
        verifications: Sequence[dict | None] | dict | None = None,
        guessable: Sequence[bool | None] | None = None,
        keys: Mapping[str, Sequence[str | None]] | None = None,
    ) -> AddResult:
        """Add validated tasks; a task already in the run (same content hash) is not added
        again, and its existing id is returned. One provenance for all, or one per task;
        `guessable`, per task, whether a stock input solves it (None: not judged, the default;
        `curriculum.guessable_weight`); `keys`, per column of `KEY_COLUMNS`, each task's key
        (`new_work.task_keys`; None, or a column left out: computed when `keyed_tasks` first
        needs it). A task held as `seed` or `proposed` that comes with origin `labeled` becomes
        labeled (`AddResult.relabeled`)."""
        provenance, verifications, guessable, rows, unkeyed = writes.add_arguments(
            tasks, provenance, verifications, guessable, keys
        )
        self._keyed -= unkeyed
        for prov in provenance:
            if prov.references:
                self._index.positions(prov.references)  # KeyError: not a task of this run
        result, appended = writes.add_tasks(
            self._engine, self._run_id, tasks, provenance, verifications, guessable, rows
        )
        self._index.append(appended)
        if result.relabeled:  # labeled now: the selection judged them as unlabeled
            self._index.relabel(result.relabeled, ORIGINS.index("labeled"))
            self._selection_cache = None
        self._p_cache = None
        self._wrote()
        return result

    def judge_guessable(self, judge: Callable[[list[Task]], list[bool]]) -> int:
        """Judge with `judge` (`trivial.stock_solves`) the abduction tasks an older pool left
        unjudged (NULL; -1 in the index, so no query when there are none); how many."""
        abduction = self._index.equal("type", TASK_TYPES.index("abduction"))
        if not (abduction & self._index.equal("guessable", -1)).any():
            return 0
        judged = writes.judge_guessable(self._engine, self._run_id, judge)
        self.reload()  # also where another process judged them first
        if judged:
            self._wrote()
        return judged

    def record_attempts(
        self,
        step: int,
        model_version: str,
        attempts: Iterable[TaskAttempts | tuple[int, int, int]],
    ) -> RecordResult:
        """Record how many answers each task got at `step` and how many were correct.

        Attempts at the same task in one call are summed. A (task, step, model_version) that
        is already recorded is ignored: record all of a step's answers to a task in one call."""
        ids, n, k = writes.aggregate_attempts(attempts)
        key = (step, model_version)
        current = self._index.take(self._index.positions(ids), (*writes.COUNTS, *writes.STATE))
        done = writes.record_attempts(
            self._engine, self._run_id, self._config, key, ids, n, k,
            current=current, seen=key in self._recorded,
        )  # fmt: skip
        self._mirror(key, done)
        if done.result.already_recorded:  # a replayed step: the database holds what counts
            self._trajectories.load(self._engine, self._run_id)
        else:
            self._trajectories.add(step, ids, n, k)
        self._p_cache = None
        self._wrote()
        return done.result

    def _mirror(self, key: tuple[int, str], done: writes.Recorded) -> None:
        """Apply to the in-memory state what a committed `record_attempts` wrote."""
        self._recorded.add(key)
        if done.ability is not None:
            self._abilities[key[0]] = done.ability
        self._index.put(self._index.positions(done.ids), done.state)

    def _wrote(self) -> None:
        if self._checkpointer is not None:
            self._checkpointer.poke()

    def rebuild_estimates(self) -> None:
        """Recompute all difficulty state by replaying the recorded attempts in step order
        (after a change of `discount` or of the Rasch settings, or a migration)."""
        replay.rebuild_estimates(self._engine, self._run_id, self._config)
        self.reload()

    def roll_back(self, step: int) -> tuple[int, int]:
        """Delete the tasks added after `step` and the attempts recorded after it, and replay
        the difficulty state from what remains: the pool as it stood when `step` ended (a run
        resumed from a checkpoint calls it with the checkpoint's step). Returns (tasks,
        attempts) deleted."""
        deleted = replay.roll_back(self._engine, self._run_id, self._config, step)
        if any(deleted):
            self.reload()
        return deleted

    # -- estimates ----------------------------------------------------------------------------

    def ability(self, step: int | None = None) -> tuple[float, float]:
        """(theta, s.d.) of the solver at `step` (default: the last step): the belief of the
        latest step at or before it, widened by the drift of the steps in between."""
        step = self.last_step if step is None else step
        earlier = [s for s in self._abilities if s <= step]
        if not earlier:
            mean, precision = difficulty.ability_prior(self._config, None, step)
        else:
            last = max(earlier)
            theta, precision, _ = self._abilities[last]
            mean, precision = difficulty.ability_prior(self._config, (last, theta, precision), step)
        return mean, float(precision**-0.5)

    def solve_rates(self, step: int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(combined p, attempted) for every task in index order; cached per state and step."""
        step = self.last_step if step is None else step
        key = (step, len(self._index))
        if self._p_cache is not None and self._p_cache[0] == key:
            return self._p_cache[1]
        ix, cfg = self._index, self._config
        theta, theta_sd = self.ability(step)
        pos = ix.attempted()
        attempted = np.zeros(len(ix), dtype=bool)
        attempted[pos] = True
        # A never-attempted task has the prior difficulty and no answers: one shared estimate.
        prior_var = cfg.difficulty_prior_sd**2
        p = np.full(len(ix), float(difficulty.irt_p(theta, theta_sd**2, 0.0, prior_var)))
        succ, fail = ix["succ"][pos], ix["fail"][pos]
        w = difficulty.decay_table(cfg, step, ix["last_step"][pos])
        var_b = difficulty.difficulty_variance(cfg, ix["difficulty_precision"][pos])
        p_irt = difficulty.irt_p(theta, theta_sd**2, ix["difficulty"][pos], var_b)
        p[pos] = difficulty.combined(cfg, p_irt, succ, fail, w)
        value = (p, attempted)
        self._p_cache = (key, value, pos)
        return value

    def estimates(self, ids: Sequence[int], step: int | None = None) -> list[Estimate]:
        """Both difficulty models' estimates for tasks at `step` (default: the last step)."""
        return self._estimates(self._index.positions(ids), step)

    def _estimates(self, positions: np.ndarray, step: int | None) -> list[Estimate]:
        step = self.last_step if step is None else step
        ix, cfg = self._index, self._config
        pick = ix.take(positions)
        w = difficulty.decay(cfg, pick["last_step"], step)
        theta, theta_sd = self.ability(step)
        var_b = difficulty.difficulty_variance(cfg, pick["difficulty_precision"])
        p_irt = difficulty.irt_p(theta, theta_sd**2, pick["difficulty"], var_b)
        p = difficulty.combined(cfg, p_irt, pick["succ"], pick["fail"], w)
        post = difficulty.posterior_mean(cfg, pick["succ"], pick["fail"], w)
        n_eff = w * (pick["succ"] + pick["fail"])
        columns = (p, post, n_eff, p_irt, pick["difficulty"], var_b)
        counts = (pick["n_answers"], pick["n_correct"])
        return [  # tolist: Python floats and ints, the values float() and int() would give
            Estimate(p_, mean, n_, irt, b, v**0.5, theta, n_answers, n_correct)
            for p_, mean, n_, irt, b, v, n_answers, n_correct in zip(
                *(c.tolist() for c in columns), *(c.tolist() for c in counts)
            )
        ]

    # -- drawing ------------------------------------------------------------------------------

    def sample(
        self,
        n: int,
        step: int | None = None,
        *,
        salt: int = 0,
        types: Sequence[TaskType] | None = None,
        for_solver: bool = True,
    ) -> SolverBatch:
        """A frontier batch of up to n distinct tasks for the solver (see `sampler.py`).

        The same pool, step and salt give the same batch; use another salt for a second,
        independent draw in one step. `types` restricts the draw to some task types.
        `for_solver=False` draws for another use (the programs of induction proposals):
        `curriculum.guessable_weight` and `curriculum.revisit_weight`, which are about the
        solver's answers, do not apply."""
        step = self.last_step if step is None else step
        p, attempted = self.solve_rates(step)
        weights = sampler.learnability(
            self._config, p, attempted, self._answers, positions=self._p_cache[2]
        )
        chosen = None
        if self._config.selection == "trapo":
            chosen = self.selection(step)
            weights[self._index.positions(chosen.rejected)] = 0.0
        guessable = self._index.equal("guessable", 1)
        if for_solver and self._config.guessable_weight != 1.0:
            weights[guessable] *= self._config.guessable_weight
        if for_solver and self._config.revisit_weight != 1.0:
            answered = self._index["n_answers"]
            weights *= sampler.revisit_factors(self._config.revisit_weight, answered, self._answers)
        groups = self._index.groups(types)
        labeled = self._index.equal("origin", ORIGINS.index("labeled"))
        rng = sampler.generator(self._config, step, salt, stream=0)
        recent = self._index.created_after(step - self._config.recent_steps)
        positions = sampler.draw_split(self._config, n, weights, groups, labeled, recent, rng)
        tasks = self.get(self._index["id"][positions].tolist(), step)
        is_recent = self._index["step"][positions] > step - self._config.recent_steps
        metrics = sampler.batch_metrics(self._config, p[positions], attempted[positions], is_recent)
        metrics["curriculum/pool_size"] = float(len(self._index))
        metrics["curriculum/drawable"] = float(np.count_nonzero(weights > 0))
        for name, mask in (("labeled", labeled), ("guessable", guessable)):
            metrics[f"curriculum/{name}_share"] = (
                float(mask[positions].mean()) if len(positions) else 0.0
            )
        if chosen is not None:
            metrics.update(chosen.metrics())
        return SolverBatch(tuple(tasks), step, n, metrics, chosen)

    def selection(self, step: int | None = None):
        """The judgement at `step` (by the `selector` the store was opened with) of every
        unlabeled task with answers in the last `trapo_window` steps; computed whatever
        `curriculum.selection` says, which decides only whether `sample` applies it."""
        if self._select is None:
            raise ValueError(
                "this pool was opened without a selection of unlabeled tasks: open it with "
                "TaskStore.open(..., selector=selfplay.semi.selection.select)"
            )
        step = self.last_step if step is None else step
        key = (step, self._trajectories.version)
        if self._selection_cache is not None and self._selection_cache[0] == key:
            return self._selection_cache[1]
        traj = self._trajectories.matrix(step)
        origin = self._index["origin"][self._index.positions(traj.ids)]
        chosen = self._select(self._config, traj, origin == ORIGINS.index("labeled"), step)
        self._selection_cache = (key, chosen)
        return chosen

    def references(
        self,
        n_prompts: int,
        step: int | None = None,
        *,
        k: int | None = None,
        types: Sequence[TaskType] | None = None,
        salt: int = 0,
    ) -> list[list[PoolTask]]:
        """K reference tasks for each of n_prompts proposer prompts: drawn by learnability
        (frontier first), then thinned so that no two in one prompt are near-duplicates."""
        from selfplay.curriculum.references import choose_references

        step = self.last_step if step is None else step
        return choose_references(self, n_prompts, step, k or self._config.references, types, salt)

    # -- reading ------------------------------------------------------------------------------

    def latest(self, n: int, before_step: int) -> list[PoolTask]:
        """The `n` tasks that entered the pool last before step `before_step`, oldest first
        (tasks the step itself or later ones added are left out)."""
        ids = self._index["id"][self._index["step"] < before_step]
        return self.get(ids[-n:].tolist() if n > 0 else [])

    def get(self, ids: Sequence[int], step: int | None = None) -> list[PoolTask]:
        """Tasks by id, in the order given, with their provenance and estimates."""
        estimates = self._estimates(self._index.positions(ids), step) if len(ids) else []
        rows, refs = reads.load_rows(self._engine, ids)
        return reads.pool_tasks([rows[i] for i in ids], refs, estimates)

    def induction_inputs(
        self, programs: Sequence[str], before_step: int
    ) -> dict[str, list[frozenset[str]]]:
        """Per program text, the input sets of the induction tasks on it that entered the pool
        before step `before_step` (those of the step itself or later ones are left out)."""
        return reads.induction_inputs(self._engine, self._run_id, programs, before_step)

    def fill_keys(self, column: str, key: Callable[[Task], str]) -> int:
        """Give the tasks without a key in `column` (`KEY_COLUMNS`: an older pool's, or added
        without one) `key(task)`; how many. Asked once, and again after a task entered without."""
        if column in self._keyed:
            return 0
        filled = writes.fill_keys(self._engine, self._run_id, column, key)
        self._keyed.add(column)
        if filled:
            self._wrote()
        return filled

    def keyed_tasks(self, column, keys, up_to_step, key, programs=True) -> dict[str, list]:
        """Per key in `column`, the (id, hash, program) of the tasks with it of step `up_to_step`
        or before (`reads.keyed_tasks`), tasks without that key given one first (`fill_keys`)."""
        self.fill_keys(column, key)
        return reads.keyed_tasks(self._engine, self._run_id, column, keys, up_to_step, programs)

    def stats(self, step: int | None = None, growth: bool = True, programs: bool = False):
        """Counts by type and origin, a difficulty histogram, growth over steps (`PoolStats`).
        `growth=False` skips the growth table, the one part that queries the attempts table
        (the loop's per-step metrics do not use it); `programs=True` adds the written
        programs' statements and loops over steps (it reads their text)."""
        from selfplay.curriculum.stats import pool_stats

        return pool_stats(self, self.last_step if step is None else step, growth, programs)


__all__ = ["TaskStore", "StoreError"]
