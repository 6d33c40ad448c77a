// The demo model users meet: a small MoE that moechat trained on the Brown corpus
// (docs/DEMO-MODEL.md), shipped beside the programs as
// <prefix>/share/moechat/moechat-demo.gguf (the build tree has it at
// build/share/moechat/). The random-weight demo built in memory
// (synth::demoModelBytes, SessionOptions::demo) stays for tests and `--demo-random`:
// it is tiny, has 16 experts, and its routing has no structure.
#pragma once

#include <string>

namespace moe {

inline constexpr const char* kTrainedDemoFile = "moechat-demo.gguf";

// Which demo a session with `demo` set opens.
enum class DemoModel { kRandom, kTrained };

// Where the trained demo is: $MOECHAT_DEMO_MODEL when set, else the first that exists
// of <program folder>/../share/moechat/ (an install's bin/, the build tree's app/ and
// tests/) and <program folder>/../../share/moechat/ (the build tree's tests/gpu/).
// Empty when there is none; *looked_in then names every place looked at.
std::string trainedDemoModelPath(std::string* looked_in = nullptr);

// trainedDemoModelPath, or a std::runtime_error that says where it looked and what
// runs without it.
std::string requireTrainedDemoModel();

// The demo the app offers: the trained one where its file is installed, else the
// random one, so the app still starts (and says which it runs). Looked up once.
DemoModel appDemoModel();
// "Demo model (Brown corpus)" or "Demo model (random weights)".
std::string demoModelName(DemoModel kind);

}  // namespace moe
