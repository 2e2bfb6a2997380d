"""The trainer: rewards, advantages, the clipped policy loss, the update, checkpoints, metrics.

The algorithm, exactly (one step of `selfplay.loop.run_step`; names are config keys):

1. Propose. For each task type t in `selfplay.task_types`, `selfplay.proposals` prompts, each
   showing K = `curriculum.references` pool tasks (drawn by `TaskStore.references`: frontier
   weighted, mutually dissimilar); induction prompts also show one deduction/abduction program
   from the pool to write inputs for. Each prompt is sampled `selfplay.proposal_samples` times
   at the run's temperature and top-p, up to `</answer>`.
2. Validate and store. The executor runs every parsed proposal twice (determinism) under the
   sandbox; a valid one becomes a task and is added to the pool (a duplicate keeps its id).
3. Estimate. Each valid proposal is answered `selfplay.attempts` times by the solver role
   (sampled, never greedy); its empirical solve rate p is the share judged correct.
4. Solve. `selfplay.solver_tasks` tasks are drawn from the pool by the curriculum sampler
   (`curriculum.shape` over the current difficulty estimates) and each is answered
   `selfplay.solver_samples` times. Every answer, of steps 3 and 4, is judged by the executor
   and recorded in the pool, which updates the difficulty estimates.
5. Reward (`rewards`). Solver answers of steps 3 and 4 (every judged answer is trained on,
   each prompt's answers a group): 1 if correct, `reward.solver_wrong` (-0.5) if well-formed
   but wrong, `reward.solver_malformed` (-1) if unreadable. Proposals: the learnability
   `reward.learnability` of p if valid and new (AZR's: 1 - p, and 0 at p in {0, 1}), less
   the repetition and novelty penalties (`reward.repetition`, `reward.novelty`; `repetition`),
   down to the higher of the duplicate and invalid penalties; `reward.proposer_duplicate`
   (-1) if valid but no new work (already in the pool, a copy of a reference shown, trivial,
   or a benchmark's program), `reward.proposer_invalid` (-0.5) if the executor refused it,
   `reward.proposer_malformed` (-1) if unreadable.
6. Advantages (`advantages`, `trainer.advantage`). trr++ (default): A = (r - mean) / (std +
   1e-6) within each (role, task type) group of the step's samples; grpo: within the samples
   of one prompt; reinforce++: within the whole batch. A group whose rewards are all equal
   gets A = 0 everywhere.
7. Update (`update`, `loss`). Log-probabilities of the sampled tokens are recomputed under the
   current weights; per token, l = -min(rho A, clip(rho, 1 - clip_low, 1 + clip_high) A) with
   rho = exp(logp_new - logp_sample) and A the rollout's advantage (times
   `trainer.propose_weight` for a proposal: `update/propose_share` logs the proposer's share
   of the advantage weight, about half by token in `learn-long`), aggregated over all
   completion tokens of a mini-batch (`trainer.aggregation: token`; `sequence` averages per
   completion first), plus
   `trainer.kl_coef` times the k3 estimate of KL(policy || initial policy) when kl_coef > 0
   (a proposal's KL times `trainer.propose_kl_weight`; with `trainer.kl_target`, the
   coefficient adapts after each step: `kl_control`).
   The rollouts are split into `trainer.mini_batches` optimizer steps (AdamW, linear warm-up
   over `trainer.warmup_steps`, then a constant rate or one decaying over the run,
   `trainer.lr_schedule`: `schedule`; gradient-norm clip `trainer.max_grad_norm`), repeated for
   `trainer.ppo_epochs`; micro-batches of `trainer.micro_batch` accumulate gradients exactly.
   Rollouts with A = 0 add nothing and are not run (unless the KL term is on). The
   completions of one prompt in a micro-batch are scored behind a single copy of it
   (`trainer.share_prompts`), each attending to the prompt and to itself only: the same
   log-probabilities and gradient as separate sequences, with the prompt computed once.
   With N processes every rank computes the same advantages over the whole step and runs its
   share of each mini-batch; losses keep the whole mini-batch's denominator and are scaled by N,
   so that DDP's averaged gradient is the one-process gradient (`selfplay.distributed`). With
   `trainer.lora.rank` > 0 only LoRA adapters (`lora`) train; the initial policy of the KL
   term is then the base model with the adapters disabled. With `trainer.lora.per_role` each
   role has its own adapter: a role's rollouts train only its adapter, divided by the role's
   own count, with its own gradient clip; each role generates with its own (`stages.use_role`).
8. Sync. The generation engine (transformers or vLLM) gets the new weights (merged, for LoRA).

How it departs from the papers:
  * AZR (Absolute Zero Reasoner) proposes with a *fixed* reference buffer sampled uniformly
    and trains the solver on the tasks just proposed; here references and the solver's batch
    come from the curriculum store, weighted by a running difficulty estimate across steps
    (the frontier), and the solve rate of a new task is estimated by `attempts` dedicated
    answers rather than by the training answers; like AZR's, they are trained on too. AZR's
    8-sample Monte-Carlo estimate is `selfplay.attempts: 8`.
  * AZR's TRR++ normalises per (role, task type) as here, and AZR optimises a PPO-clipped
    objective with one symmetric clip range; here the clip range is asymmetric (DAPO's
    clip-higher, clip_high > clip_low) and the loss is aggregated per token, not per sequence.
    With ppo_epochs = mini_batches = 1 the ratio is 1 and nothing is clipped: the update is
    then plain REINFORCE with TRR++ advantages, as in AZR's first step on each batch.
  * R-Zero trains a separate challenger and solver model with GRPO and rewards the
    challenger by the solver's uncertainty (largest at p = 1/2) minus a repetition penalty;
    here one model plays both roles; R-Zero's shape is `reward.learnability: rzero_peak` or
    `rzero_band`. Its repetition penalty (`reward.repetition`) clusters programs by the
    token Jaccard of their shape rather than questions by BLEU, and takes the penalty down to
    the penalty floor (what a copy or a refusal earns) rather than to 0. Exact repeats,
    copies of a reference shown, trivial tasks (`selfplay.trivial`) and benchmark programs
    are no new work: they earn `reward.proposer_duplicate` and stay out of the pool.
  * TraPO's semi-supervised setting lives in the curriculum store, not in the loss: labeled
    tasks (`seed.labeled`) join solver batches at `curriculum.labeled_ratio`, and with
    `curriculum.selection: trapo` self-proposed tasks are admitted by how well their solve-rate
    trajectories correlate with the labeled tasks' (`selfplay/semi/selection.py`).
    Every answer is checked by the executor, so no majority-vote pseudo-labels are involved.
  * The policy trained is the tempered distribution the engine samples from
    (softmax(logits / temperature), as verl and TRL score it): the engines report the
    log-probabilities of the distribution they sampled from and the update scores the same
    tempered logits, so the gradient is taken on samples of the distribution it changes.
"""
