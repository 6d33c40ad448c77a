// The subcommands of moechat-cli. Each returns the process exit code and
// throws UsageError for bad arguments (main prints usage and exits 2).
#pragma once

#include <string>
#include <vector>

namespace moe::cli {

int runInfo(const std::vector<std::string>& args);
int runGenerate(const std::vector<std::string>& args);
int runChat(const std::vector<std::string>& args);
int runGenModel(const std::vector<std::string>& args);
int runLogits(const std::vector<std::string>& args);
int runBench(const std::vector<std::string>& args);
int runBenchKernels(const std::vector<std::string>& args);     // bench --kernels
int runBenchSampler(const std::vector<std::string>& args);     // bench --sampler
int runBenchChatTokens(const std::vector<std::string>& args);  // bench --chat-tokens
int runTrace(const std::vector<std::string>& args);
int runTrain(const std::vector<std::string>& args);
int runEvalPredictor(const std::vector<std::string>& args);
int runRoutingTrace(const std::vector<std::string>& args);

}  // namespace moe::cli
