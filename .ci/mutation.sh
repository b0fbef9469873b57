#!/usr/bin/env bash
# Mutation testing (issue 28) with mutmut 3: mutate the named modules and run, for each mutant,
# only the tests of that module's test files that reach the mutated function.
#
#   .ci/mutation.sh [--min-score PCT] [--jobs N] [--keep DIR] MODULE...
#   .ci/mutation.sh --ci          # the CI subset: ops/optim.py + regularizer.py, threshold below
#   .ci/mutation.sh --all         # every module of the [mutmut] section of setup.cfg
#   .ci/mutation.sh --full        # ops/, the passes and the executor (hours; docs/mutation.md)
#   .ci/mutation.sh --ops-passes  # --full without the executor
#   .ci/mutation.sh --sample N --seed S --ops-passes   # a seeded uniform sample of N mutants
#   .ci/mutation.sh --match REGEX MODULE...          # only the mutants whose name matches
#
# MODULE is a path such as fluidlite/ops/optim.py. The run happens in a copy of the work tree
# (tracked and untracked, not ignored files) under a temporary directory, so mutmut's mutants/
# never appears here and no file of fluidlite/ is touched. Prints per-module counts
# (killed / survived / timeout / no tests / total), the surviving mutants, and exits 1 when the
# score (killed + timeout) / (total - skipped) of the whole run is below --min-score.
# With --sample N, all mutants are generated but only N of them, drawn uniformly at random with
# Python's random.Random(S).sample over the sorted names, are run; the report counts only those
# and adds a 95 % Wilson interval for the score (docs/mutation.md, seventh round).
set -euo pipefail
# the whole script is one block: bash parses it before running, so editing this file while a
# run is going does not change that run
{
cd "$(dirname "$0")/.."
repo=$(pwd)

min_score=0
jobs=$(nproc)
keep=""
sample=0
seed=0
match=""
modules=()
while [ $# -gt 0 ]; do
  case "$1" in
    --min-score) min_score=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --sample) sample=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --match) match=$2; shift 2 ;;
    --ci) modules+=(fluidlite/ops/optim.py fluidlite/regularizer.py)
          min_score=${MUTATION_CI_MIN_SCORE:-93}; shift ;;
    --full)
      # the op registry, the rewrite passes (backward, clip, regularization, optimizers) and
      # the executor (plans, control-flow blocks, fusion patterns and kernels)
      mapfile -t -O "${#modules[@]}" modules < <(
        ls fluidlite/ops/*.py fluidlite/backward.py fluidlite/clip.py fluidlite/regularizer.py \
           fluidlite/optimizer/*.py fluidlite/executor/*.py fluidlite/executor/fusion/*.py \
           fluidlite/executor/fusion/*/*.py | grep -v '/__init__\.py$')
      shift ;;
    --ops-passes)
      # --full without the executor: the population of the sampled score (seventh round;
      # mutating executor/fusion makes mutmut 3.8.1's stats run fail, docs/mutation.md)
      mapfile -t -O "${#modules[@]}" modules < <(
        ls fluidlite/ops/*.py fluidlite/backward.py fluidlite/clip.py fluidlite/regularizer.py \
           fluidlite/optimizer/*.py | grep -v '/__init__\.py$')
      shift ;;
    --all)
      mapfile -t -O "${#modules[@]}" modules < <(python3 - <<'PY'
import configparser
c = configparser.ConfigParser(); c.read("setup.cfg")
print("\n".join(x for x in c.get("mutmut", "only_mutate").split("\n") if x))
PY
)
      shift ;;
    -h|--help) sed -n 2,19p "$0"; exit 0 ;;
    *) modules+=("$1"); shift ;;
  esac
done
[ ${#modules[@]} -gt 0 ] || { echo "usage: $0 [--min-score PCT] MODULE... | --ci | --all" >&2; exit 2; }

python3 -c "import mutmut" 2>/dev/null || python3 -m pip install --quiet "mutmut==3.8.1"

# the test files that exercise each module (mutmut runs, per mutant, the subset of these whose
# tests call the mutated function). Named cases first; otherwise an op module gets its own
# tests/ops/test_<name>.py (all of tests/ops/ when it has none, e.g. shared kernels), a mutant
# test file of the same name, and the dtype checks.
tests_for() {
  local base
  base=$(basename "$1" .py)
  case "$1" in
    fluidlite/ops/optim.py|fluidlite/ops/optim_adam.py|fluidlite/ops/optim_adagrad.py|fluidlite/ops/inplace.py)
      echo tests/ops/test_optim.py tests/ops/test_optim_adam.py tests/ops/test_optim_adagrad.py \
           tests/ops/test_inplace.py tests/test_optimizer.py tests/test_fusion.py \
           tests/test_fusion_l2_decay.py tests/test_dtype_stability.py \
           tests/test_mutants_optim.py tests/test_mutants_optim_adagrad.py \
           tests/test_mutants_inplace.py ;;
    fluidlite/core/names.py)
      # unique names: the counters, guards and journal (atomic builds), dygraph's lazy stems
      echo tests/test_fluid18_doc_fixes_round2.py tests/test_atomic_build.py \
           tests/dygraph/test_layers.py tests/dygraph/test_equivalence.py ;;
    fluidlite/dygraph/replay.py)
      # the step replay: its own tests, the memory of replayed steps, and the models whose
      # steps it replays
      echo tests/dygraph/test_replay.py tests/dygraph/test_replay_state.py \
           tests/dygraph/test_activation_memory.py tests/dygraph/test_shared_weight_grad.py \
           tests/dygraph/test_step_caches.py tests/test_sparse_embedding.py ;;
    fluidlite/core/selected_rows.py)
      echo tests/test_sparse_embedding.py tests/test_scope_selected_rows.py \
           tests/test_mutants_selected_rows.py tests/test_fusion_l2_decay.py ;;
    fluidlite/ops/optim_extra.py)
      # dpsgd / dgc_clip_by_norm / dgc / dgc_momentum are tested through the Dpsgd and
      # DGCMomentum optimizers (no tests/ops/test_optim_extra.py)
      echo tests/test_fluid_names_optimizers.py tests/test_mutants_optimizer_special.py \
           tests/test_dtype_stability.py tests/test_mutants_optim_extra.py ;;
    fluidlite/ops/optim_proximal.py)
      # proximal_gd / proximal_adagrad: the optim_* list plus their own mutant tests
      echo tests/ops/test_optim.py tests/ops/test_optim_proximal.py tests/test_optimizer.py \
           tests/test_dtype_stability.py tests/test_mutants_optim.py \
           tests/test_mutants_optim_proximal.py ;;
    fluidlite/ops/optim_*.py)
      echo tests/ops/test_optim.py tests/ops/test_$base.py tests/test_optimizer.py \
           tests/test_dtype_stability.py tests/test_mutants_optim.py ;;
    fluidlite/ops/clip.py|fluidlite/clip.py)
      echo tests/ops/test_clip.py tests/test_clip.py tests/test_clip_overflow.py \
           tests/test_clip_properties.py tests/test_functional_clip.py tests/test_fusion.py \
           tests/test_mutants_clip.py ;;
    fluidlite/regularizer.py)
      echo tests/test_regularizer.py tests/test_optimizer.py tests/test_fusion.py \
           tests/test_mutants_optim.py tests/test_mutants_regularizer.py ;;
    fluidlite/ops/reduce.py)
      echo tests/ops/test_reduce.py tests/test_dtype_stability.py tests/test_higher_order_math.py \
           tests/test_mutants_reduce.py ;;
    fluidlite/ops/pool.py|fluidlite/ops/pool3d.py)
      # pool2d delegates 3-D / adaptive cases to pool3d's kernels; pool3d has no test file
      echo tests/ops/test_pool.py tests/ops/test_pool_geometry.py tests/ops/test_pool_more.py \
           tests/ops/test_pool_phases.py tests/ops/test_pool_flat.py tests/ops/test_pool_parts.py \
           tests/ops/test_pool_whole_map.py tests/ops/test_conv3d.py tests/test_dtype_stability.py tests/test_lower_grad.py \
           tests/test_mutants_pool.py ;;
    fluidlite/ops/embedding.py)
      echo tests/ops/test_embedding.py tests/ops/test_lookup_dequant.py \
           tests/test_sparse_embedding.py tests/test_dtype_stability.py tests/test_lower_grad.py \
           tests/test_mutants_embedding.py ;;
    fluidlite/ops/sequence.py)
      echo tests/ops/test_sequence.py tests/ops/test_seq_padded.py tests/test_dtype_stability.py \
           tests/test_lower_grad.py tests/test_mutants_sequence.py ;;
    fluidlite/ops/_winograd.py)
      echo tests/ops/test_winograd.py tests/ops/test_conv.py tests/test_dtype_stability.py \
           tests/test_fusion_saved_conv.py tests/test_conv_epilogue_blocks.py ;;
    fluidlite/ops/conv.py)
      # the convolutions' ops (the kernels have their own lists): their tests, conv2d's
      # Winograd tiles kept for its gradient, and im2col's columns (test_conv_kernels.py)
      echo tests/ops/test_conv.py tests/ops/test_winograd.py tests/test_fusion_saved_conv.py \
           tests/ops/test_conv_blocks.py tests/test_dtype_stability.py tests/test_lower_grad.py \
           tests/test_conv_epilogue_blocks.py tests/ops/test_conv_last.py \
           tests/ops/test_conv_kernels.py tests/test_mutants_conv.py tests/ops/test_separable.py \
           tests/ops/test_conv_transpose_tiles.py ;;
    fluidlite/ops/_conv_last.py)
      # the channels-last kernels: their own tests, NHWC conv2d, and conv2d_fusion's epilogues
      echo tests/ops/test_conv_last.py tests/ops/test_conv.py tests/test_inference_kernels.py \
           tests/ops/test_separable.py ;;
    fluidlite/core/threads.py)
      echo tests/test_threads.py tests/ops/test_conv_kernels.py tests/ops/test_batch_norm_parts.py \
           tests/ops/test_activation_parts.py tests/ops/test_layer_norm_parts.py \
           tests/ops/test_pool_parts.py ;;
    fluidlite/ops/paddle2.py)
      # the Paddle 2 ops are tested outside tests/ops (the sampled run found them "no tests")
      echo tests/test_paddle2_ops.py tests/test_paddle2_programs.py tests/test_dtype_stability.py \
           tests/test_lower_grad.py tests/test_mutants_paddle2.py ;;
    fluidlite/ops/control_flow.py)
      # no tests/ops/test_control_flow.py: the arrays, Print, While and the LoD ops are tested
      # through the layers (tests/test_control_flow*.py, test_rnn_*.py)
      echo tests/ops/test_control.py tests/ops/test_array_length.py tests/ops/test_select_output.py \
           tests/ops/test_rnn_memory_helper.py tests/test_control_flow.py \
           tests/test_control_flow_grad.py tests/test_while_counter_grad.py tests/test_rnn_static.py \
           tests/test_rnn_layers.py tests/test_api_arguments_round3.py tests/test_op_operator.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_control_flow.py ;;
    fluidlite/ops/rnn.py|fluidlite/ops/rnn_unit.py)
      # lstm / gru / lstmp and gru_unit / lstm_unit / cudnn_lstm share tests/ops/test_rnn.py
      # and the layers' tests (rnn_unit.py has no test file of its own)
      echo tests/ops/test_rnn.py tests/test_rnn_layers.py tests/test_rnn_static.py \
           tests/test_contrib_basic_rnn.py tests/dygraph/test_nn_dedicated_ops.py \
           tests/test_dtype_stability.py tests/test_higher_order_math.py tests/test_lower_grad.py \
           tests/test_mutants_$base.py ;;
    fluidlite/ops/ctc.py|fluidlite/ops/crf.py)
      # the padded (Length) forms of warpctc / linear_chain_crf / crf_decoding are tested in
      # tests/ops/test_seq_padded.py
      echo tests/ops/test_$base.py tests/ops/test_seq_padded.py tests/test_zoo18_static_fixes.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_$base.py ;;
    fluidlite/ops/loss.py)
      echo tests/ops/test_loss.py tests/ops/test_loss_extra.py tests/test_dtype_stability.py \
           tests/test_mutants_loss.py ;;
    fluidlite/ops/detection.py|fluidlite/ops/rcnn.py|fluidlite/ops/yolo_loss.py)
      # the detection ops are tested in tests/ops/test_detection*.py, test_poly_nms.py and
      # through the layers (rcnn / yolo_loss have no test file of their own)
      echo tests/ops/test_detection.py tests/ops/test_detection_nms.py tests/ops/test_poly_nms.py \
           tests/test_layers_detection.py tests/test_dtype_stability.py tests/test_lower_grad.py \
           tests/test_mutants_$base.py ;;
    fluidlite/ops/roi.py)
      echo tests/ops/test_roi.py tests/test_layers_detection.py tests/test_layers_vision.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_roi.py ;;
    fluidlite/ops/hash.py)
      # the hash op and XXH64 are tested with creation_extra's ops (no test_hash.py)
      echo tests/ops/test_creation_extra.py tests/test_dtype_stability.py \
           tests/test_mutants_hash.py ;;
    fluidlite/ops/vision.py)
      echo tests/ops/test_vision.py tests/test_layers_vision.py tests/test_dtype_stability.py \
           tests/test_lower_grad.py tests/test_mutants_vision.py ;;
    fluidlite/ops/vision_norm.py|fluidlite/ops/interp.py)
      # group / instance / spectral / data norm, inplace_abn and the interp ops are tested with
      # the vision ops (no tests/ops/test_vision_norm.py or test_interp.py); interp's resize
      # is also pool3d's adaptive kernel, bicubic_interp a Paddle 2 program op
      echo tests/ops/test_vision.py tests/test_layers_vision.py tests/ops/test_paddle_oracle.py \
           tests/dygraph/test_nn_dedicated_ops.py tests/test_paddle2_programs.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_$base.py ;;
    fluidlite/ops/mask_labels.py)
      # generate_mask_labels is tested with the detection ops (no tests/ops/test_mask_labels.py)
      echo tests/ops/test_detection.py tests/test_layers_detection.py \
           tests/test_dtype_stability.py tests/test_mutants_mask_labels.py ;;
    fluidlite/ops/sequence_text.py)
      # row_conv, ctc_align, edit_distance, sequence_erase, chunk_eval and im2sequence are
      # tested with the sequence ops and the metrics (no tests/ops/test_sequence_text.py)
      echo tests/ops/test_sequence.py tests/ops/test_seq_padded.py tests/test_evaluator.py \
           tests/test_metrics.py tests/test_layer_checks_round5.py \
           tests/test_api_arguments_round3.py tests/test_dtype_stability.py \
           tests/test_lower_grad.py tests/test_mutants_sequence_text.py ;;
    fluidlite/ops/einsum.py)
      # einsum is tested with the Paddle 2.6 exports (no tests/ops/test_einsum.py)
      echo tests/test_paddle2_exports.py tests/ops/test_paddle_oracle.py \
           tests/test_dtype_stability.py tests/test_mutants_einsum.py ;;
    fluidlite/ops/quant_linear.py)
      # quantize_linear / dequantize_linear are tested with the other small Paddle 2.x ops
      echo tests/ops/test_paddle2_misc.py tests/ops/test_paddle_oracle.py \
           tests/test_dtype_stability.py tests/test_mutants_quant_linear.py ;;
    fluidlite/ops/fusion_seq.py|fluidlite/ops/fusion_rnn.py)
      # the fused sequence / RNN ops share tests/ops/test_fusion_ops.py (fused_embedding_seq_pool
      # also through contrib.layers)
      echo tests/ops/test_fusion_ops.py tests/test_layer_checks_round5.py \
           tests/test_dtype_stability.py tests/test_mutants_$base.py ;;
    fluidlite/ops/unary.py)
      # the elementwise math ops share the activation ops' tests (no tests/ops/test_unary.py)
      echo tests/ops/test_activation.py tests/ops/test_activation_extra.py \
           tests/test_dtype_stability.py tests/test_higher_order_math.py tests/test_lower_grad.py \
           tests/test_mutants_unary.py ;;
    fluidlite/ops/ctr.py)
      # rank_attention (in ctr.py) has its own tests/ops/test_rank_attention.py
      echo tests/ops/test_ctr.py tests/ops/test_rank_attention.py tests/test_dtype_stability.py \
           tests/test_lower_grad.py tests/test_mutants_ctr.py ;;
    fluidlite/ops/norm.py)
      # batch_norm's channel parts / blocks and layer_norm's row parts have test files of
      # their own besides test_norm.py
      echo tests/ops/test_norm.py tests/ops/test_batch_norm_buffers.py \
           tests/ops/test_batch_norm_parts.py tests/ops/test_layer_norm_parts.py \
           tests/ops/test_whole_runs.py tests/ops/test_row_sums.py \
           tests/test_mutants_norm.py tests/test_fusion_norm_act.py \
           tests/test_fusion_norm_add_act.py tests/test_fusion_saved_layer_norm.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py ;;
    fluidlite/ops/_conv_kernels.py)
      # the shared conv kernels (depthwise, 1x1, copy/run_parts) have no op of their own: the
      # conv tests reach them (the default, all of tests/ops, would be far too slow)
      echo tests/ops/test_conv_kernels.py tests/ops/test_conv.py tests/ops/test_winograd.py \
           tests/ops/test_depthwise_flat.py tests/ops/test_conv_blocks.py \
           tests/ops/test_conv_band.py tests/test_inference_kernels.py \
           tests/ops/test_whole_runs.py \
           tests/test_mutants_conv.py tests/test_dtype_stability.py \
           tests/test_mutants_conv_kernels.py tests/test_conv_epilogue_blocks.py ;;
    fluidlite/ops/rnn_core.py)
      # the shared LSTM / GRU recurrences: reached through the lstm / gru / gru_unit /
      # fusion_* / rnn_v2 ops' tests (no op of its own)
      echo tests/ops/test_rnn.py tests/ops/test_fusion_ops.py tests/ops/test_rnn_v2.py \
           tests/test_rnn_layers.py tests/test_rnn_static.py tests/test_contrib_basic_rnn.py \
           tests/dygraph/test_nn_dedicated_ops.py tests/test_layer_checks_round5.py \
           tests/test_mutants_rnn.py tests/test_mutants_rnn_unit.py \
           tests/test_mutants_fusion_rnn.py tests/test_mutants_fusion_seq.py \
           tests/test_mutants_rnn_v2.py tests/test_dtype_stability.py \
           tests/test_mutants_rnn_core.py ;;
    fluidlite/ops/detection_map.py)
      # detection_map is tested with the detection ops and the DetectionMAP metric
      echo tests/ops/test_detection.py tests/test_layers_detection.py tests/test_evaluator.py \
           tests/test_dtype_stability.py tests/test_mutants_detection_map.py ;;
    fluidlite/ops/sort_unique.py)
      # argsort / unique / unique_with_counts are tested with the search and index ops and the
      # tensor layers (no tests/ops/test_sort_unique.py)
      echo tests/ops/test_search.py tests/ops/test_index_extra.py tests/test_layers_tensor_extra.py \
           tests/test_paddle2_ops.py tests/test_dtype_stability.py tests/test_mutants_sort_unique.py ;;
    fluidlite/ops/compose.py)
      # the Compose / Sym toolkit has no op: it is reached through the double_grad rules of the
      # activation and elementwise ops
      echo tests/ops/test_activation.py tests/ops/test_elementwise.py tests/test_higher_order_math.py \
           tests/test_higher_order_linalg.py tests/test_lower_grad.py tests/test_mutants_compose.py ;;
    fluidlite/ops/distributed_ids.py)
      # split_ids / merge_ids / ref_by_trainer_id / fake_init are tested with shuffle_batch
      echo tests/ops/test_shuffle_ids.py tests/test_dtype_stability.py \
           tests/test_mutants_distributed_ids.py ;;
    fluidlite/ops/py_func.py)
      # py_func is tested through fluid.layers.py_func (no tests/ops/test_py_func.py)
      echo tests/test_layers_py_func.py tests/test_dtype_stability.py tests/test_mutants_py_func.py ;;
    fluidlite/ops/selected_rows.py)
      # split_selected_rows is also tested with the scope's SelectedRows
      echo tests/ops/test_selected_rows.py tests/test_scope_selected_rows.py \
           tests/test_dtype_stability.py tests/test_mutants_selected_rows.py ;;
    fluidlite/ops/detection_nms.py)
      # matrix_nms (in detection_nms.py) has its own tests/ops/test_matrix_nms.py
      echo tests/ops/test_detection_nms.py tests/ops/test_matrix_nms.py \
           tests/test_dtype_stability.py tests/test_mutants_detection_nms.py ;;
    fluidlite/ops/random_extra.py)
      # shuffle_batch (in random_extra.py) is tested with the ids ops in test_shuffle_ids.py
      echo tests/ops/test_random_extra.py tests/ops/test_shuffle_ids.py \
           tests/test_dtype_stability.py tests/test_mutants_random_extra.py ;;
    fluidlite/ops/dropout.py)
      # the seed op (in dropout.py) is tested through RecomputeOptimizer's seeded dropouts
      echo tests/ops/test_dropout.py tests/test_recompute_dropout.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_dropout.py ;;
    fluidlite/ops/broadcast.py)
      # fluid's broadcasting helpers register no op: the elementwise, compare and fused
      # elementwise ops' tests reach them (no tests/ops/test_broadcast.py), and whole_runs /
      # in_parts have test files of their own
      echo tests/ops/test_elementwise.py tests/ops/test_compare.py \
           tests/ops/test_fused_elemwise.py tests/ops/test_whole_runs.py \
           tests/ops/test_in_parts.py tests/test_mutants_elementwise.py \
           tests/test_dtype_stability.py tests/test_mutants_broadcast.py ;;
    fluidlite/ops/activation.py)
      # GELU's slope saved for its gradient (forward_saving / backward_saved) is tested with
      # the fusion that calls it; the blocked float32 kernels have test files of their own
      echo tests/ops/test_activation.py tests/ops/test_activation_blocks.py \
           tests/ops/test_activation_parts.py tests/ops/test_row_sums.py \
           tests/test_small_kernels.py tests/test_fusion_saved_grad.py \
           tests/test_dtype_stability.py tests/test_higher_order_math.py tests/test_lower_grad.py \
           tests/test_mutants_activation.py ;;
    fluidlite/ops/math_more.py)
      # fc's kernel is also fc_group's (the inference pass that groups sibling fc layers)
      echo tests/ops/test_math_more.py tests/test_inference_kernels.py tests/ops/test_linalg.py \
           tests/test_dtype_stability.py tests/test_lower_grad.py tests/test_mutants_math_more.py ;;
    fluidlite/ops/*.py)
      # every op module: its own tests, plus the second-order (double_grad) and lowered
      # (lower / lower_grad) rules, which are tested across ops in their own files
      local common="tests/test_dtype_stability.py tests/test_higher_order_math.py
                    tests/test_higher_order_linalg.py tests/test_lower_grad.py
                    tests/test_mutants_$base.py"
      if [ -f "tests/ops/test_$base.py" ]; then
        echo "tests/ops/test_$base.py" $common
      else
        echo tests/ops $common
      fi ;;
    fluidlite/backward.py)
      echo tests/test_backward.py tests/test_gradients.py tests/test_lower_grad.py \
           tests/test_control_flow_grad.py tests/test_functional_grad.py \
           tests/test_recompute_dropout.py tests/test_passes_toolkit.py \
           tests/test_fluid18_arguments.py tests/test_mutants_backward.py ;;
    fluidlite/optimizer/*.py)
      # test_recompute_dropout.py: RecomputeOptimizer's seed ops (wrappers.py's _seed_dropouts)
      echo tests/test_optimizer.py tests/test_fluid_names_optimizers.py \
           tests/test_gradient_merge.py tests/test_lookahead_switch.py tests/test_amp.py \
           tests/test_recompute_dropout.py \
           tests/test_mutants_optim.py tests/test_mutants_optimizer.py \
           tests/test_mutants_optimizer_optimizers.py tests/test_mutants_optimizer_wrappers.py \
           tests/test_mutants_optimizer_special.py tests/test_mutants_optimizer_gradient_merge.py ;;
    fluidlite/executor/executor.py)
      # run(), the plan cache, use_prune, _runner (dygraph step replay), the dataset loops
      echo tests/test_executor.py tests/test_executor_prune.py tests/test_executor_reliability.py \
           tests/test_executor_structure.py tests/test_dataset.py tests/dygraph/test_replay.py \
           tests/test_local_places.py tests/test_lod_persistable.py tests/test_lod_tensor.py \
           tests/test_reader.py tests/test_mutants_executor.py ;;
    fluidlite/executor/fusion/patterns/stacked_grad.py|fluidlite/executor/fusion/kernels/stacked_grad.py)
      # a shared weight's stacked gradient: its own tests, the unrolled RNNs it rewrites
      echo tests/test_fusion_stacked_grad.py tests/test_rnn_static.py tests/test_fusion.py \
           tests/test_fusion_patterns.py tests/test_executor_structure.py ;;
    fluidlite/executor/fusion/patterns/linear_act.py|fluidlite/executor/fusion/kernels/linear_act.py)
      # an fc layer's forward as one kernel: its own tests, and the programs with fc layers
      echo tests/test_fusion_linear_act.py tests/test_executor.py tests/test_fusion.py \
           tests/test_fusion_patterns.py tests/test_lower_grad.py ;;
    fluidlite/executor/fusion/patterns/saved_grad.py|fluidlite/executor/fusion/kernels/saved_grad.py)
      # a forward op and its grad op sharing work (GELU's slope): its own tests, and the
      # activation tests of the ops declaring saves_for_grad
      echo tests/test_fusion_saved_grad.py tests/test_fusion_saved_conv.py \
           tests/test_fusion_saved_layer_norm.py \
           tests/ops/test_activation.py tests/ops/test_activation_blocks.py tests/test_fusion.py \
           tests/test_fusion_patterns.py ;;
    fluidlite/executor/fusion/patterns/norm_act.py|fluidlite/executor/fusion/kernels/norm_act.py)
      # batch norm + activation, a residual block's end, and the centred map handed to the
      # gradient: their own tests, and the programs with batch norm
      echo tests/test_fusion_norm_act.py tests/test_fusion_norm_add_act.py tests/test_fusion.py \
           tests/test_fusion_patterns.py tests/test_executor_structure.py ;;
    fluidlite/dygraph/autograd.py|fluidlite/profiler.py)
      # the eager backward (the stacked weight gradients, the profiler's eager timings)
      echo tests/dygraph/test_shared_weight_grad.py tests/dygraph/test_engine_cache.py \
           tests/dygraph/test_autograd.py tests/dygraph/test_replay.py \
           tests/dygraph/test_profiler.py tests/test_executor.py ;;
    fluidlite/core/selected_rows.py)
      # SelectedRows and merge_rows: the sparse gradients of embeddings and their updates
      echo tests/ops/test_selected_rows.py tests/test_scope_selected_rows.py \
           tests/test_sparse_embedding.py tests/ops/test_embedding.py tests/test_mutants_clip.py \
           tests/test_mutants_optim_adagrad.py tests/test_dtype_stability.py ;;
    fluidlite/executor/*)
      # plans, control-flow blocks, fusion: also where their errors (empty batches, bad
      # feeds), loops, fused updates (optimizers, AMP) and small kernels are tested
      echo tests/test_executor.py tests/test_executor_prune.py tests/test_executor_reliability.py \
           tests/test_executor_structure.py tests/test_fusion.py tests/test_fusion_patterns.py \
           tests/test_control_flow_grad.py tests/test_control_flow.py \
           tests/test_while_counter_grad.py tests/test_api_arguments_round3.py \
           tests/test_small_kernels.py tests/test_amp_mixed_precision.py tests/test_optimizer.py \
           tests/test_mutants_executor.py ;;
    fluidlite/inference/passes.py|fluidlite/inference/ops.py)
      # the inference passes and the op types they create: the predictor's tests, and the
      # conv / fc kernels the created ops call
      echo tests/test_inference_kernels.py tests/test_inference_api.py tests/ops/test_linalg.py \
           tests/ops/test_conv_band.py tests/test_inference_rows.py \
           tests/test_inference_pass_cases.py tests/ops/test_conv_last.py \
           tests/ops/test_separable.py tests/ops/test_conv_transpose_tiles.py \
           tests/test_inference_specialize.py ;;
    fluidlite/inference/rows.py)
      # the row rules of slice_pushdown_pass: their own tests and the pass's
      echo tests/test_inference_rows.py tests/test_inference_kernels.py \
           tests/test_inference_pass_cases.py ;;
    fluidlite/inference/bench.py|fluidlite/inference/predictor.py|fluidlite/inference/config.py|fluidlite/inference/tensor.py)
      # fluidlite bench (its inputs: --shape, --seq-len, LoD feeds), the predictor's engines,
      # its shape specialisation, and the rest of fluid 1.8's API (models from memory,
      # NativeConfig, switch_ir_debug)
      echo tests/test_inference_api.py tests/test_inference_specialize.py \
           tests/test_inference_fluid18_api.py ;;
    fluidlite/io/inference.py)
      # save / load_inference_model and the models from memory (set_model_buffer)
      echo tests/test_io.py tests/test_hostile_models.py tests/test_inference_fluid18_api.py \
           tests/test_inference_api.py ;;
    fluidlite/onnx/*)
      # the exporter: its op tables, run-time shapes, control flow and the predictor's engine
      echo tests/test_onnx.py tests/test_onnx_more.py tests/test_onnx_dynamic.py \
           tests/test_onnx_control.py tests/test_inference_api.py ;;
    *) echo "no test list for $1: add it to tests_for in $0" >&2; exit 2 ;;
  esac
}

selection=()
for m in "${modules[@]}"; do
  [ -f "$m" ] || { echo "no such module: $m" >&2; exit 2; }
  list=$(tests_for "$m")          # an assignment: set -e stops on an unknown module
  for t in $list; do
    [ -e "$t" ] && selection+=("$t")
  done
done
mapfile -t selection < <(printf '%s\n' "${selection[@]}" | sort -u)

work=${keep:-$(mktemp -d /tmp/fluidlite-mutation.XXXXXX)}
mkdir -p "$work"
[ -n "$keep" ] || trap 'rm -rf "$work"' EXIT
# a copy of the work tree as it is (tracked + untracked, minus ignored files such as mutants/)
git ls-files -z --cached --others --exclude-standard | \
  (while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done) | \
  tar -cf - --null -T - | tar -xf - -C "$work"
cd "$work"
rm -rf mutants

python3 - "${modules[*]}" "${selection[*]}" <<'PY'
import configparser, sys
mods, tests = sys.argv[1].split(), sys.argv[2].split()
c = configparser.ConfigParser(interpolation=None)
c.read("setup.cfg")
if not c.has_section("mutmut"):
    c.add_section("mutmut")
c.set("mutmut", "source_paths", "\nfluidlite")
c.set("mutmut", "only_mutate", "\n" + "\n".join(mods))
c.set("mutmut", "pytest_add_cli_args_test_selection", "\n" + "\n".join(tests))
# tests that keep once-per-process state (a warning given once) fail when mutmut runs the
# selection a second time in its process (the clean run); they are left out of mutation runs
once_only = ["tests/test_executor.py::test_layers_data_is_not_feed_checked_but_warns_once",
             # draws its data from the module's RNG at call time: on mutmut's second (clean)
             # run the new draw fails its central-difference check (analytic -0.83 against
             # numeric -0.47 at one cell: a MAX kink); tests/test_mutants_sequence.py checks
             # MAX's gradient against a loop instead
             "tests/ops/test_sequence.py::test_sequence_pool_grad[MAX]",
             # seen failing in mutmut's stats run over the whole --full selection on
             # 2026-11-29 (they pass alone and in the suite): a layer-check TypeError after
             # other tests in the same process; a segfault inside mutmut's trampoline under
             # hypothesis (docs/mutation.md, seventh round)
             "tests/ops/test_activation.py::test_layer_errors",
             "tests/test_clip.py::test_property_clip_by_norm_never_increases_a_norm"]
deselect = [f"--deselect={t}" for t in once_only if t.split("::")[0] in tests]
if deselect:
    c.set("mutmut", "pytest_add_cli_args", "\n" + "\n".join(deselect))
# files that tests read besides tests/ (mutmut copies only the sources and tests/)
c.set("mutmut", "also_copy", "\nsamples\ndocs\nREADME.md")
with open("setup.cfg", "w") as f:
    c.write(f)
PY

echo "mutating: ${modules[*]}"
echo "tests:    ${selection[*]}"
start=$(date +%s)
names=()
if [ -n "$match" ] && [ "$sample" -eq 0 ]; then
  sample=-1                     # every generated mutant whose name matches $match
fi
if [ "$sample" -ne 0 ]; then
  # generate every mutant without running any (mutmut run's first step), list their names
  # sorted, and draw the sample from them; the names go to $work/sample.txt
  MATCH="$match" python3 - "$sample" "$seed" "$work/all-mutants.txt" "$work/sample.txt" \
    > "$work/generate.log" 2>&1 <<'PY' || { tail -30 "$work/generate.log"; echo "mutant generation failed" >&2; exit 3; }
import os, random, re, sys
from pathlib import Path
import mutmut.__main__ as mm
from mutmut.utils.file_utils import copy_also_copy_files, copy_src_dir, setup_source_paths
n, seed, all_path, sample_path = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
mm.set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
copy_src_dir(); copy_also_copy_files(); setup_source_paths(); mm.store_lines_covered_by_tests()
mm.create_mutants(os.cpu_count() or 2)
names = sorted(name for _, name, _ in mm.collect_source_file_mutation_data(mutant_names=())[0])
Path(all_path).write_text("\n".join(names) + "\n")
if os.environ.get("MATCH"):
    names = [m for m in names if re.search(os.environ["MATCH"], m)]
    if n == -1:
        n = len(names)
if n > len(names) or not names:
    sys.exit(f"--sample {n}: only {len(names)} mutants were generated (or matched)")
Path(sample_path).write_text("\n".join(sorted(random.Random(seed).sample(names, n))) + "\n")
PY
  echo "sample: $sample of $(wc -l < "$work/all-mutants.txt") mutants, seed $seed ($work/sample.txt)"
  mapfile -t names < "$work/sample.txt"
fi
# mutmut's exit code is not the verdict (the score below is); a crash shows in the report
mutmut run --max-children "$jobs" "${names[@]}" > "$work/mutmut-run.log" 2>&1 || \
  { tail -30 "$work/mutmut-run.log"; echo "mutmut run failed" >&2; exit 3; }
echo "mutmut run: $(( $(date +%s) - start )) s"
if [ "$sample" -ne 0 ]; then
  # only the sampled mutants have a result; the others are "not checked"
  mutmut results --all true | grep -F -f <(sed 's/$/:/' "$work/sample.txt") > "$work/results.txt" || true
else
  mutmut results --all true > "$work/results.txt"
fi

python3 - "$min_score" "$work/results.txt" <<'PY'
import collections, sys
min_score, path = float(sys.argv[1]), sys.argv[2]
per = collections.defaultdict(collections.Counter)
survivors = []
for line in open(path):
    line = line.strip()
    if not line or ":" not in line:
        continue
    key, status = line.rsplit(":", 1)
    status = status.strip()
    module = key.split(".x\u01c1")[0].split(".x_")[0]
    per[module][status] += 1
    if status not in ("killed", "timeout"):
        survivors.append(f"{key}: {status}")
tot = collections.Counter()
print(f"{'module':40s} {'killed':>7s} {'survived':>8s} {'timeout':>7s} {'no tests':>8s} {'other':>5s} {'total':>5s}  score")
for module, c in sorted(per.items()):
    tot.update(c)
    other = sum(c.values()) - c["killed"] - c["survived"] - c["timeout"] - c["no tests"]
    n = sum(c.values()) - c["skipped"]
    print(f"{module:40s} {c['killed']:7d} {c['survived']:8d} {c['timeout']:7d} {c['no tests']:8d} {other:5d} {sum(c.values()):5d}  {100*(c['killed']+c['timeout'])/max(n,1):5.1f}%")
n = sum(tot.values()) - tot["skipped"]
score = 100 * (tot["killed"] + tot["timeout"]) / max(n, 1)
print(f"{'total':40s} {tot['killed']:7d} {tot['survived']:8d} {tot['timeout']:7d} {tot['no tests']:8d} {'':5s} {sum(tot.values()):5d}  {score:5.1f}%")
if n:
    # Wilson score interval, 95 %: the interval for a sample's killed fraction (--sample)
    z, p = 1.959964, score / 100
    mid = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5 / (1 + z * z / n)
    print(f"95 % Wilson interval of the score: {100 * (mid - half):.1f}% .. {100 * (mid + half):.1f}% (n = {n})")
if survivors:
    print("not killed (`mutmut show NAME` in the --keep directory shows the diff):")
    for s in survivors:
        print("   ", s)
if n == 0:
    print("no mutant was tested"); sys.exit(1)
if score < min_score:
    print(f"mutation score {score:.1f}% is below the threshold {min_score}%"); sys.exit(1)
print(f"mutation score {score:.1f}% (threshold {min_score}%)")
PY
exit
}
