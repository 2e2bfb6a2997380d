"""The stages from validate to reward, and the step's metrics, on records written by hand: proposals
as the propose stage records them, answered by a scripted engine (the generation protocol, no
model) that knows every pool task's right answer, with the real executor and task pool.

Every judged answer is a rollout (the estimate answers of new tasks too, in groups of their
own); the pool is seeded from the model's proposals before the first step; proposal prompts name
their topic; every generation runs as its role. What counts as new work: `test_new_work.py`.
"""

from __future__ import annotations

import dataclasses

import pytest

from selfplay import stages
from selfplay.engine.base import Generation
from selfplay.types import Stored, Task, Validated
from tests.stages.scripted import (
    REVERSED,
    SORTED,
    TRIPLE,
    ScriptedProposer,
    one_step,
    proposed,
)


def test_estimate_answers_are_rollouts_in_groups_of_their_own(make_run):
    # The seed is always answered right (no signal); the new task right once in two.
    run, seed_id = make_run(
        ["selfplay.solver_tasks=2", "trainer.advantage=grpo"],
        right=lambda task: [True, True] if task.program == SORTED else [True, False],
    )
    stored, judged, rollouts, metrics = one_step(run, [proposed(0, "deduction", TRIPLE, "4")])
    assert [s.outcome for s in stored] == ["valid"]
    purposes = [j.attempted.purpose for j in judged]
    assert purposes == ["estimate"] * 2 + ["train"] * 4  # the new task, then both pool tasks
    assert len(rollouts) == 1 + len(judged)  # the proposal and every judged answer
    solver = rollouts[1:]
    estimate_groups = {r.group for r, p in zip(solver, purposes, strict=True) if p == "estimate"}
    train_groups = {r.group for r, p in zip(solver, purposes, strict=True) if p == "train"}
    assert len(estimate_groups) == 1 and not estimate_groups & train_groups
    assert [round(r.advantage) for r in solver[:2]] == [1, -1]  # right, wrong: a signal
    assert metrics["reward/estimate_rollouts"] == 2
    assert metrics["reward/rollouts"] == 7
    # the estimate pair and the new task's training pair carry signal, the seed's pair not
    assert metrics["advantage/nonzero_share"] == pytest.approx(4 / 7)


def test_trr_groups_estimate_answers_with_the_solver_answers_of_their_type(make_run):
    run, _ = make_run(
        ["selfplay.solver_tasks=2", "trainer.advantage=trr++"],
        right=lambda task: [True, True] if task.program == SORTED else [True, False],
    )
    _, judged, rollouts, _ = one_step(run, [proposed(0, "deduction", TRIPLE, "4")])
    solver = [r for r in rollouts if r.role == "solve"]
    assert len(solver) == len(judged) == 2 + 2 * 2
    # one (solve, deduction) group over estimate and train answers: every right answer, the
    # seed's included (whose own group would give 0), has the same advantage
    right = {round(r.advantage, 3) for r in solver if r.reward == 1.0}
    wrong = {round(r.advantage, 3) for r in solver if r.reward < 1.0}
    assert len(right) == len(wrong) == 1 and right.pop() > 0 > wrong.pop()


def test_no_estimate_rollouts_when_the_solver_does_not_train(make_run):
    run, _ = make_run(["selfplay.solver_tasks=1", "selfplay.train_roles=[propose]"])
    _, _, rollouts, metrics = one_step(run, [proposed(0, "deduction", TRIPLE, "4")])
    assert [r.role for r in rollouts] == ["propose"]
    assert metrics["reward/estimate_rollouts"] == 0


def test_lengths_and_the_share_cut_at_the_token_limit_per_role(make_run):
    """Every second answer runs to the token limit with 4 tokens (the others end with 2); one
    of the two proposals (3 tokens each) was cut as well."""
    run, _ = make_run(["selfplay.solver_tasks=1"])
    answerer = run.engine

    class Cutting:
        def generate(self, prompts, params):
            out = []
            for g in answerer.generate(prompts, params):
                cut = dataclasses.replace(
                    g.completions[1],
                    token_ids=(1,) * 4,
                    logprobs=(-0.1,) * 4,
                    finish_reason="length",
                )
                out.append(Generation(g.prompt_token_ids, (g.completions[0], cut)))
            return out

    run.engine = Cutting()
    cut = dataclasses.replace(proposed(1, "abduction", REVERSED, "'ab'"), finish_reason="length")
    _, judged, _, metrics = one_step(run, [proposed(0, "deduction", TRIPLE, "4"), cut])
    assert len(judged) == 6  # two answers to each new task and to the pool's task
    assert metrics["solve/clipped_ratio"] == 0.5 and metrics["solve/mean_length"] == 3.0
    assert metrics["propose/clipped_ratio"] == 0.5 and metrics["propose/mean_length"] == 3.0


_SEED_TOTALS = ("seed/proposals", "seed/valid", "seed/rounds")


def test_a_seeding_round_counts_every_valid_proposal_once():
    """A task an earlier round pooled is a repeat of the round (the store stage takes it for
    step 0's own), apart from renamed ones; a new task is added; an invalid one only proposed."""
    from selfplay.self_seed import round_counts

    def stored(no_new_work: str = "", added: bool = False, valid: bool = True) -> Stored:
        p = proposed(0, "deduction", TRIPLE, "4")
        task = Task("deduction", TRIPLE, ("4",), ("12",)) if valid else None
        return Stored(Validated(p, (), task), 7 if valid else None, added, no_new_work)

    rows = [
        stored(added=True),  # new
        stored(),  # pooled by an earlier round: not added, not marked
        stored("repeat"),  # twice in the round
        stored("repeat:renamed"),
        stored("repeat:behaviour"),
        stored("copy"),
        stored(valid=False),
    ]
    assert round_counts(rows) == {
        "seed/proposals": 7.0,
        "seed/valid": 6.0,
        "seed/added": 1.0,
        "seed/copy": 1.0,
        "seed/renamed": 1.0,
        "seed/alike": 1.0,
        "seed/repeat": 2.0,
    }


def test_the_pool_is_seeded_from_the_models_new_proposals_before_the_first_step(make_run):
    """`selfplay.seed_proposals` samples per prompt at step 0: copies of the seed and trivial
    tasks stay out, a new program enters once, and again with its variables renamed it stays
    out too (counted apart from exact repeats); nothing is asked when the key is 0."""
    from selfplay.self_seed import SEEDING_FILE, seed_from_model

    fence = "<answer>\n```python\n{}\n\nf({})\n```\n</answer>"
    texts = [
        fence.format(SORTED, "[2, 1]"),  # a copy of the seed, the reference shown
        fence.format("def f(a):\n    b = a\n    return b", "'x'"),  # the identity: trivial
        fence.format(REVERSED, "'abc'"),  # new work
        fence.format(REVERSED, "'xyz'"),  # the same program again, another input
        "I like turtles.",
        fence.format("def f(t):\n    return t[::-1]", "'abc'"),  # the new work, renamed
    ]
    run, _ = make_run(["selfplay.seed_proposals=6", "selfplay.proposals=1"])
    run.engine = ScriptedProposer(texts)
    metrics = seed_from_model(run)
    assert run.engine.asked == [(2, 6)]  # one prompt per task type, six samples each
    assert metrics["seed/proposals"] == 12 and metrics["seed/valid"] == 10
    assert metrics["seed/copy"] == 2 and metrics["seed/trivial"] == 2
    assert metrics["seed/renamed"] == 2 and "seed/repeat" not in metrics
    pooled = [t.task for t in run.store.get(run.store.index["id"].tolist())]
    assert sorted({t.program for t in pooled}) == sorted({SORTED, REVERSED})
    assert metrics["seed/added"] == len(pooled) - 1  # the seed was there before
    assert all(t.provenance.step == 0 for t in run.store.get(run.store.index["id"].tolist()))

    assert (run.folder / SEEDING_FILE).exists()
    again = seed_from_model(run)  # a restart before the first checkpoint: the seeding is done
    assert again == metrics and run.engine.asked == [(2, 6)]
    (run.folder / SEEDING_FILE).unlink()  # its record lost: the same samples add nothing new
    again = seed_from_model(run)
    assert again["seed/added"] == 0 and len(run.store) == len(pooled)
    assert sum(v for k, v in again.items() if k not in _SEED_TOTALS) == again["seed/valid"]

    off, _ = make_run()
    off.engine = ScriptedProposer(texts)
    assert seed_from_model(off) == {} and off.engine.asked == []


def test_a_long_seeding_goes_in_rounds_and_resumes_after_the_last_finished_one(make_run):
    """`selfplay.seed_round`: 5 samples per prompt in rounds of 2, 2 and 1, each with its own
    generation seed, its references drawn from the pool the rounds before filled. Stopped in
    the third round, the seeding goes on from it: the same seed, the metrics of all three."""
    import json

    from selfplay.self_seed import SEEDING_FILE, seed_from_model

    fence = "<answer>\n```python\ndef f(s):\n    return s[::-1] * {}\n\nf('ab')\n```\n</answer>"

    class Rounds(ScriptedProposer):  # a new program each round; stops when told to
        def __init__(self, stop_at=None, first=0):
            super().__init__([])
            self.seeds, self.prompts, self.stop_at, self.first = [], [], stop_at, first

        def generate(self, prompts, params):
            if len(self.seeds) == self.stop_at:
                raise KeyboardInterrupt
            self.texts = [fence.format(self.first + len(self.seeds) + 2)] * 2
            self.seeds.append(params.seed)
            self.prompts.append([p[1].content for p in prompts])
            return super().generate(prompts, params)

    run, _ = make_run(
        ["selfplay.seed_proposals=5", "selfplay.seed_round=2", "selfplay.proposals=1"]
    )
    run.engine = Rounds(stop_at=2)
    with pytest.raises(KeyboardInterrupt):
        seed_from_model(run)
    record = json.loads((run.folder / SEEDING_FILE).read_text())
    assert record["rounds"] == 2 and record["metrics"]["seed/added"] == 2 * 2  # a type each
    assert len(set(run.engine.seeds)) == 2  # each round its own seed
    assert "s[::-1] * 2" in " ".join(run.engine.prompts[1])  # round 0's task, a reference

    first = run.engine.seeds
    run.engine = Rounds(first=2)  # the round it resumes from
    heard = []
    metrics = seed_from_model(run, lambda *a: heard.append(a[:2]))
    assert run.engine.asked == [(2, 1)] and heard == [(3, 3)]  # the third round alone
    assert run.engine.seeds[0] not in first
    assert metrics["seed/added"] == 3 * 2 and metrics["seed/proposals"] == 2 * (2 + 2 + 1)
    assert metrics["seed/rounds"] == 3
    again = Rounds()  # the whole seeding once more from scratch: the third round's seed
    run.engine = again
    (run.folder / SEEDING_FILE).unlink()
    seed_from_model(run)
    assert again.seeds[:2] == first and again.seeds[2] == run.engine.seeds[2]

    (run.folder / SEEDING_FILE).write_text(json.dumps({**record, "seed_round": 3, "rounds": 1}))
    with pytest.raises(ValueError, match="seed_round=3"):
        seed_from_model(run)
    (run.folder / SEEDING_FILE).write_text("{not json")
    with pytest.raises(ValueError, match="not a seeding record"):
        seed_from_model(run)


def test_topics_name_an_idea_in_each_written_proposal_prompt(make_run):
    """`roles.topics`: each deduction and abduction prompt names the idea drawn for it from
    the run seed, the step and the prompt; induction prompts name none; off, no prompt does."""
    from selfplay.proposer.topics import topic_for

    class Recorder(ScriptedProposer):
        def generate(self, prompts, params):
            self.prompts = [p[1].content for p in prompts]
            return super().generate(prompts, params)

    for topics in (False, True):
        run, _ = make_run([f"roles.topics={str(topics).lower()}", "selfplay.proposals=2"])
        run.engine = Recorder(["I like turtles."])
        stages.propose(run, 3)
        types = run.config.selfplay.task_types
        expected = [
            topic_for(run.config.run.seed, 3, salt, k) if topics else None
            for salt, kind in enumerate(types)
            if kind in ("deduction", "abduction")
            for k in range(2)
        ]
        named = [
            p.split("around this idea: ")[1].split(".\n\n")[0] if "this idea" in p else None
            for p in run.engine.prompts
            if "one input for it" in p
        ]
        assert named == expected
        assert not any("this idea" in p for p in run.engine.prompts if "one input for it" not in p)


def test_written_proposals_avoid_their_references_programs(make_run):
    """`generation.avoid_reference_ngrams`: each deduction and abduction prompt's completions
    are steered away from the programs of the references its prompt shows, with the knob's n
    and penalty; off, nothing is avoided."""

    class Recorder(ScriptedProposer):
        def generate(self, prompts, params):
            self.params = params
            self.prompts = [p[1].content for p in prompts]
            return super().generate(prompts, params)

    more = [Task("abduction", REVERSED, ("'abc'",), ("'cba'",))]
    for n in (0, 5):
        run, _ = make_run(
            [
                f"generation.avoid_reference_ngrams={n}",
                "generation.avoid_reference_penalty=2.5",
                "selfplay.task_types=[deduction, abduction, induction]",
            ],
            more=more,
        )
        run.engine = Recorder(["I like turtles."])
        stages.propose(run, 1)
        params = run.engine.params
        if not n:
            assert params.avoid is None
            continue
        assert params.avoid_ngram == 5 and params.avoid_penalty == 2.5
        assert len(params.avoid) == len(run.engine.prompts)
        written = [p for p in run.engine.prompts if "one input for it" in p]
        assert 0 < len(written) < len(run.engine.prompts)  # induction prompts too
        for prompt, texts in zip(run.engine.prompts, params.avoid, strict=True):
            if "one input for it" not in prompt:
                assert texts == ()  # an induction proposal writes inputs for a given program
                continue
            assert texts and all(f"```python\n{t}" in prompt for t in texts)


def test_every_generation_runs_as_its_role(make_run, monkeypatch):
    """With one adapter per role (`stages.use_role`), proposals are written as the proposer,
    the answers of both kinds (estimates and the frontier batch) and the in-run evaluation's as
    the solver: each generation follows a `use_role` of its role."""
    from types import SimpleNamespace

    from selfplay import loop

    events: list[str] = []
    monkeypatch.setattr(stages, "use_role", lambda run, role: events.append(role))

    def recorded(engine):
        generate = engine.generate
        engine.generate = lambda prompts, params: (
            events.append("generate") or generate(prompts, params)
        )
        return engine

    run, _ = make_run()
    run.engine = recorded(ScriptedProposer(["I like turtles."]))
    stages.propose(run, 1)
    proposing = list(events)
    events.clear()

    run, _ = make_run()
    run.engine = recorded(run.engine)
    stored = stages.store_tasks(
        run, stages.validate(run, (proposed(0, "abduction", TRIPLE, "4"),)), 1
    )
    batch, _ = stages.sample(run, 1)
    stages.solve(run, stored, batch, 1)
    solving = list(events)
    events.clear()

    run.evaluator = lambda engine, folder, step: events.append("generate") or {}
    loop._evaluate(run, 1, SimpleNamespace(evaluation=lambda *args: None))
    evaluating = list(events)

    def roles_of_generations(sequence):
        role, roles = None, []
        for event in sequence:
            if event == "generate":
                roles.append(role)
            else:
                role = event
        return roles

    for sequence, role in ((proposing, "propose"), (solving, "solve"), (evaluating, "solve")):
        generated = roles_of_generations(sequence)
        assert generated and set(generated) == {role}, sequence


def test_the_solver_samples_and_trains_at_its_own_temperature(make_run, monkeypatch):
    """`generation.solve_temperature`: proposals are sampled at `generation.temperature`,
    every answer (estimates and the frontier batch) at the solver's, and the update scores
    each role's rollouts at the temperature they were sampled at."""
    temperatures: list[float] = []

    def recorded(engine):
        generate = engine.generate
        engine.generate = lambda prompts, params: (
            temperatures.append(params.temperature) or generate(prompts, params)
        )
        return engine

    settings = ["generation.temperature=0.9", "generation.solve_temperature=0.4"]
    run, _ = make_run(settings)
    run.engine = recorded(ScriptedProposer(["I like turtles."]))
    stages.propose(run, 1)
    assert temperatures and set(temperatures) == {0.9}
    temperatures.clear()

    run, _ = make_run(settings)
    run.engine = recorded(run.engine)
    stored, judged, rollouts, _ = one_step(run, [proposed(0, "deduction", TRIPLE, "4")])
    assert {j.attempted.purpose for j in judged} == {"estimate", "train"}
    assert temperatures and set(temperatures) == {0.4}

    seen = {}
    monkeypatch.setattr(stages, "policy_update", lambda *a, **k: seen.update(k) or {})
    run.engine.sleep = run.engine.wake_up = lambda: None
    run.kl = run.entropy = None
    stages.update(run, rollouts, 1)
    assert (seen["temperature"], seen["solve_temperature"]) == (0.9, 0.4)
