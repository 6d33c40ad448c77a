#!/usr/bin/env bash
# Proof that the tests can fail. Each mutation below breaks one thing a test is
# named after (a stream wait, a fence, a byte count, a rule): it replaces an exact
# piece of a source file, rebuilds only the targets the test needs in an existing
# build folder, runs that test's named cases (GTEST_FILTER, through CTest so the
# test gets its usual environment) and expects them to fail. The file is restored
# after each mutation, also when the script is interrupted.
#
#   tools/mutations/run.sh [BUILD_DIR [NAME...]]   (default: build, every mutation)
#
# BUILD_DIR is a configured and built tree of this checkout in which those tests
# passed (CI: the README stage's build/). A mutation whose text is no longer in its
# file is an error: the code moved, and the table below must follow it. At the end
# the touched targets are rebuilt from the restored sources, so BUILD_DIR is as it
# was. Exit 1 when a mutation survived (its test passed) or did not apply.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
only=("$@")

# name | file | exact text | replacement | CTest name | GTEST_FILTER | targets to rebuild
mutations=(
  "copy-link-wait|offload/cuda/cuda_copy_link.cpp|  checkCuda(cudaStreamWaitEvent(stream, r->event, 0), \"cudaStreamWaitEvent (expert slot)\");|  (void)r;|cuda_offload_engine|*slowCopiesMatchCpu*|moechat_cuda_standin test_cuda_offload_engine"
  "copy-link-wait-gated|offload/cuda/cuda_copy_link.cpp|  checkCuda(cudaStreamWaitEvent(stream, r->event, 0), \"cudaStreamWaitEvent (expert slot)\");|  (void)r;|cuda_offload|*computeStreamWaitsForChunk*|moechat_cuda_standin test_cuda_offload"
  "slot-fence-wait|offload/cuda/cuda_offload_device.cpp|  checkCuda(cudaStreamWaitEvent(copy_, event_, 0), \"cudaStreamWaitEvent (slot fence)\");||cuda_offload_engine|*slowCopiesMatchCpu*|moechat_cuda_standin test_cuda_offload_engine"
  "predictor-reads-device-routers|offload/skip_gate_predictor.cpp|    const WeightView& r = model.hostRouter(il);|    const WeightView& r = model.weights().layers[size_t(il)].router;|cuda_offload_engine|*sessionOnCuda*|moechat_cuda_standin moechat_offload test_cuda_offload_engine"
  "read-back-from-device|inference/cuda/cuda_backend.cpp|  checkCuda(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToHost, stream_), \"cuda backend: read back\");|  checkCuda(cudaStreamSynchronize(stream_), \"read back\");  std::memcpy(staging, src, bytes);|cuda_kernels|CudaKernels.memory:CudaKernels.rmsNorm|moechat_cuda_standin test_cuda_kernels"
  "matvec-reads-rows-twice|inference/cuda/cuda_matvec.cu|    rowDot<T, NT>(row, a, idx, nt, acc);|    rowDot<T, NT>(row, a, idx, nt, acc);  rowDot<T, NT>(row, a, idx, nt, acc);|cuda_moe|*decodeReadsTheWeightsOnce*|moechat_cuda_standin test_cuda_moe"
  "delta-rows-lane-order|inference/delta_rule_rows.cpp|    _mm256_store_ps(lanes + 8, hi[r]);|    _mm256_store_ps(lanes + 8, lo[r]);|delta_rule|*everyInstructionSet*|test_delta_rule"
  "decode-ahead-order|inference/generator.cpp|    ahead = wanted && tf_.queueChosenStep(ending(sampler.reductionOfChosen(cached_, one), 1));|    ahead = false && wanted;|cuda_decode_ahead|*aGreedyResidentDecodeNeverStallsTheDevice*|test_cuda_decode_ahead"
  "sampled-ahead-uniform-order|inference/sampler.cpp|  r.uniform = drawn_ahead_[ahead];|  r.uniform = drawn_ahead_.front();|cuda_sampled_ahead|*sampledTokensEqualTodaysOrder*|test_cuda_sampled_ahead"
  "sampled-ahead-order|inference/sampler.h|  bool drawsFromCandidates() const { return params_.temperature > 0.0f && params_.top_k > 0; }|  bool drawsFromCandidates() const { return false; }|cuda_sampled_ahead|*aSampledResidentDecodeNeverStallsTheDevice*|test_cuda_sampled_ahead"
  "draw-ignores-uniform|inference/cuda/cuda_draw.cu|    const double r = __dmul_rn(values->uniform, total);|    const double r = __dmul_rn(0.5, total);|cuda_sampled_ahead|*theDrawEqualsTheHostsSample*|moechat_cuda_standin test_cuda_sampled_ahead"
  "wide-unit-reads-scale-for-min|inference/cuda/cuda_quant.cuh|    m = b & 63;|    m = a & 63;|cuda_kernels|CudaKernels.matmulAllTypes|moechat_cuda_standin test_cuda_kernels"
  "run-tail-drops-a-byte|inference/cuda/cuda_quant.cuh|    return lead ? ld16(q) : 0u;|    return lead ? ld16(q) & 0xffu : 0u;|cuda_kernels|CudaKernels.matmulAllTypes|moechat_cuda_standin test_cuda_kernels"
  "rope-factors-table-without-factors|inference/cuda/cuda_backend_step.cpp|        ropeAnglesWithFactors(p, r.n_rot, r.base, r.factors.data(), cs);|        ropeAngles(p, r.n_rot, r.base, nullptr, cs);|cuda_decode_graph|*everyArchitectureDecodesAsOneGraph*|moechat_cuda_standin test_cuda_decode_graph"
  "chat-tokens-key-prefix|inference/tokenizer/chat_tokens.cpp|  const std::string_view key = run.text;|  const std::string_view key = std::string_view(run.text).substr(0, 40);|chat_tokens|*ChatTokens.idsEqualTheWholeHistorysOverAConversation/chatml_bpe|test_chat_tokens"
  "chat-tokens-ignore-options|inference/tokenizer/chat_tokens.cpp|  const ChatPrompt prompt = chatPrompt(family, messages, add_generation_prompt, options);|  const ChatPrompt prompt = chatPrompt(family, messages, add_generation_prompt, {});|chat_tokens|*ChatTokens.idsEqualTheWholeHistorysOverAConversation/qwen35_bpe|test_chat_tokens"
  "chat-tokens-one-map|inference/tokenizer/chat_tokens.cpp|  RunMap& map = runs_[run.at_text_start ? 1 : 0];|  RunMap& map = runs_[0];|chat_tokens|*ChatTokens.aRunThatBeginsThePromptIsKeptApart/deepseek_spm|test_chat_tokens"
  "chat-tokens-forget-nothing|inference/tokenizer/chat_tokens.cpp|return run.second.used < round_;|return false;|chat_tokens|*ChatTokens.forgetUnusedKeepsTheLastPromptsRuns/chatml_bpe|test_chat_tokens"
  "chat-tokens-fit-drops-system|inference/tokenizer/chat_tokens.cpp|    const size_t first = (!kept->empty() && kept->front().role == \"system\") ? 1 : 0;|    const size_t first = 0;|chat_tokens|*ChatTokens.fittingLeavesOutWhatTheWholeHistoryLoopDid/chatml_bpe|test_chat_tokens"
  "chat-tokens-fit-boundary|inference/tokenizer/chat_tokens.cpp|  while (count(family, *kept, true, options) > budget) {|  while (count(family, *kept, true, options) >= budget) {|chat_tokens|*ChatTokens.fittingLeavesOutWhatTheWholeHistoryLoopDid/chatml_bpe|test_chat_tokens"
  "engine-forgets-the-chat|app/core/local_chat_engine.cpp|  cache.forgetUnused();  // keeps|  cache.clear();  // keeps|local_chat_engine|*aFollowUpReplyTokenisesOnlyTheNewText|test_local_chat_engine"
  "engine-ignores-chat-options|app/core/local_chat_engine.cpp|messages, chat_options_,|messages, {},|local_chat_engine|*qwen35WithThinkingOffAnswersAtOnce|test_local_chat_engine"
  "nan-router-logits-rank-first|inference/routing.cpp|    if (std::isnan(c)) c = -std::numeric_limits<double>::infinity();|    (void)c;|model_config|*nanRouterLogits*|test_model_config"
)

saved_file=""
saved_copy=$(mktemp)
restore() {
  if [ -n "$saved_file" ]; then
    cp "$saved_copy" "$saved_file"
    saved_file=""
  fi
}
trap 'restore; rm -f "$saved_copy"' EXIT
trap 'exit 130' INT TERM

wanted() {
  [ ${#only[@]} -eq 0 ] && return 0
  local n
  for n in "${only[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

failures=0
rebuild=()
for entry in "${mutations[@]}"; do
  IFS='|' read -r name file old new test filter targets <<<"$entry"
  wanted "$name" || continue
  content=$(cat "$file"; printf x)  # the x keeps the file's trailing newlines
  content=${content%x}
  if [[ "$content" != *"$old"* ]]; then
    echo "mutation $name: its text is no longer in $file (the code moved: update tools/mutations/run.sh)"
    failures=$((failures + 1))
    continue
  fi
  cp "$file" "$saved_copy"
  saved_file=$file
  printf '%s' "${content/"$old"/"$new"}" >"$file"
  read -r -a target_list <<<"$targets"
  rebuild+=("${target_list[@]}")
  start=$SECONDS
  if ! cmake --build "$build" --target "${target_list[@]}" >"$build/mutation-$name.log" 2>&1; then
    echo "mutation $name: the mutated tree does not build (see $build/mutation-$name.log)"
    failures=$((failures + 1))
    restore
    continue
  fi
  if GTEST_FILTER="$filter" ctest --test-dir "$build" --no-tests=error -R "^${test}\$" --output-on-failure >>"$build/mutation-$name.log" 2>&1; then
    echo "mutation $name: SURVIVED, $test ($filter) passed with it ($((SECONDS - start)) s)"
    failures=$((failures + 1))
  else
    echo "mutation $name: caught by $test ($filter) ($((SECONDS - start)) s)"
  fi
  restore
done

if [ ${#rebuild[@]} -gt 0 ]; then
  mapfile -t unique < <(printf '%s\n' "${rebuild[@]}" | sort -u)
  cmake --build "$build" --target "${unique[@]}" >/dev/null
fi
[ "$failures" -eq 0 ] || {
  echo "$failures mutation(s) survived or did not apply"
  exit 1
}
