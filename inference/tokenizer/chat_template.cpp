// Per-family chat templates, written from the Jinja templates the models
// publish in tokenizer_config.json (cited per family below). We do not run
// Jinja: each template is a few string concatenations, and tests pin the
// exact strings. When a GGUF's tokenizer.chat_template disagrees, the file wins:
// add a family or a test with that text.
#include "inference/tokenizer/chat_template.h"

#include <optional>

namespace moe {

namespace {

// DeepSeek's end-of-sentence token: fullwidth vertical bars and U+2581.
const std::string kDeepSeekEos =
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>";

// mistralai/Mixtral-8x7B-Instruct-v0.1: "[INST] " + user + " [/INST]" and
// assistant + eos_token, strictly alternating, no system role. Later Mistral
// templates fold a system prompt into the first user turn as
// system + "\n\n" + user; we do the same.
ChatPrompt mixtral(const std::vector<ChatMessage>& messages) {
  std::string system;
  ChatPrompt out;
  bool folded = false;
  for (const auto& m : messages) {
    if (m.role == "system") {
      system += (system.empty() ? "" : "\n\n") + m.content;
    } else if (m.role == "user") {
      out.markup("[INST] ");
      if (!folded && !system.empty()) {
        out.content(system);
        out.markup("\n\n");
      }
      folded = true;
      out.content(m.content);
      out.markup(" [/INST]");
    } else if (m.role == "assistant") {
      out.content(m.content);
      out.markup("</s>");
    }
  }
  return out;  // the generation prompt is the "[/INST]" already written
}

// ChatML (Qwen1.5-MoE / Qwen2-MoE / Qwen3-MoE tokenizer_config.json):
// "<|im_start|>" + role + "\n" + content + "<|im_end|>\n" per message, then
// "<|im_start|>assistant\n". Qwen1.5/2 insert a default system prompt ("You are
// a helpful assistant.") when none is given; Qwen3 does not. We insert none:
// the app supplies its system prompt explicitly.
ChatPrompt chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  for (const auto& m : messages) {
    out.markup("<|im_start|>" + m.role + "\n");
    out.content(m.content);
    out.markup("<|im_end|>\n");
  }
  if (add_generation_prompt) out.markup("<|im_start|>assistant\n");
  return out;
}

// deepseek-ai/deepseek-moe-16b-chat (and deepseek-llm-*-chat): system content
// + "\n\n"; "User: " + content + "\n\n"; "Assistant: " + content + eos_token;
// generation prompt "Assistant:" (no trailing space).
ChatPrompt deepseek(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  // The system prompt comes first whatever its position in the list.
  for (const auto& m : messages) {
    if (m.role != "system") continue;
    out.content(m.content);
    out.markup("\n\n");
  }
  for (const auto& m : messages) {
    if (m.role == "user") {
      out.markup("User: ");
      out.content(m.content);
      out.markup("\n\n");
    } else if (m.role == "assistant") {
      out.markup("Assistant: ");
      out.content(m.content);
      out.markup(kDeepSeekEos);
    }
  }
  if (add_generation_prompt) out.markup("Assistant:");
  return out;
}

// allenai/OLMoE-1B-7B-0924-Instruct: the Tulu template of allenai/open-instruct:
// "<|system|>\n" + content + "\n", "<|user|>\n" + content + "\n",
// "<|assistant|>\n" + content + eos_token (+ "\n" unless last), then
// "<|assistant|>\n" as generation prompt. eos_token is "<|endoftext|>".
ChatPrompt olmoe(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    const bool last = i + 1 == messages.size();
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    out.markup("<|" + m.role + "|>\n");
    out.content(m.content);
    if (m.role == "assistant")
      out.markup(std::string("<|endoftext|>") + (last ? "" : "\n"));
    else
      out.markup("\n");
  }
  if (add_generation_prompt) out.markup("<|assistant|>\n");
  return out;
}

// zai-org/GLM-4.5 and GLM-4.5-Air (chat_template.jinja): "[gMASK]<sop>", then
// "<|system|>\n", "<|user|>\n" or "<|assistant|>\n" + content per message; the
// generation prompt is "<|assistant|>" (the model writes its "\n<think>" itself).
// Tools and thinking options are not templated.
ChatPrompt glm(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  out.markup("[gMASK]<sop>");
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    out.markup("<|" + m.role + "|>\n");
    out.content(m.content);
  }
  if (add_generation_prompt) out.markup("<|assistant|>");
  return out;
}

// gpt-oss's "harmony" format (openai/harmony, the model's chat_template.jinja):
// "<|start|>" + role + "<|message|>" + content + "<|end|>"; first a system message
// naming the reasoning effort and the channels, the app's system prompt as the
// developer's instructions, earlier replies on the final channel, and the
// generation prompt "<|start|>assistant". The model answers on its analysis
// channel, then "<|start|>assistant<|channel|>final<|message|>" ... "<|return|>".
// An earlier reply without the reasoning the app showed before it (a leading quoted
// block that begins "> **Thinking**", app/core/harmony_reply.h): harmony prompts carry
// only the final answers of earlier turns.
std::string withoutThinking(const std::string& reply) {
  if (reply.rfind("> **Thinking**", 0) != 0) return reply;
  size_t pos = 0;
  while (pos < reply.size() && reply[pos] == '>') {  // the quote's lines
    const size_t eol = reply.find('\n', pos);
    pos = eol == std::string::npos ? reply.size() : eol + 1;
  }
  while (pos < reply.size() && reply[pos] == '\n') ++pos;
  return reply.substr(pos);
}

// The reasoning of an earlier reply as the app showed it (the lines of the leading
// "> **Thinking**" quote without their "> "), and the answer after it. A reply
// without that block is all answer.
struct ShownReply {
  std::string reasoning, answer;
};
ShownReply splitShownReply(const std::string& reply) {
  ShownReply out;
  out.answer = withoutThinking(reply);
  if (out.answer.size() == reply.size()) return out;  // no Thinking block
  // The quote's lines after its header line, each without its "> " (or ">").
  bool first = true;
  for (size_t pos = reply.find('\n');
       pos != std::string::npos && pos + 1 < reply.size() && reply[pos + 1] == '>';) {
    const size_t start = pos + 2, eol = reply.find('\n', start);
    std::string_view line =
        std::string_view(reply).substr(start, eol == std::string::npos ? eol : eol - start);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!first) out.reasoning += '\n';
    out.reasoning += line;
    first = false;
    pos = eol;
  }
  return out;
}

// Jinja's trim (Python's str.strip()) for the ASCII whitespace chat text has.
std::string trimmed(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\v\f";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return std::string(s.substr(first, s.find_last_not_of(kSpace) - first + 1));
}

// Qwen3.5 / Qwen3.6 (Qwen/Qwen3.6-35B-A3B chat_template.jinja; Qwen3.5's differs only
// in options we do not use): ChatML turns of trimmed content, the system message
// first; an assistant turn after the last user message carries its reasoning as
// "<think>\n" + reasoning + "\n</think>\n\n" + answer, earlier ones only the answer;
// the generation prompt "<|im_start|>assistant\n<think>\n" opens the reasoning (with
// enable_thinking false, ChatOptions::thinking, it closes an empty block instead:
// "<think>\n\n</think>\n\n"). Several system messages are joined into the one system turn (the template
// accepts only one, first). Tools, images and preserve_thinking are not templated.
ChatPrompt qwen35(const std::vector<ChatMessage>& messages, bool add_generation_prompt, bool thinking) {
  ChatPrompt out;
  std::string system;
  bool has_system = false;
  for (const auto& m : messages) {
    if (m.role != "system") continue;
    system += (has_system ? "\n\n" : "") + m.content;
    has_system = true;
  }
  if (has_system) {
    out.markup("<|im_start|>system\n");
    out.content(trimmed(system));
    out.markup("<|im_end|>\n");
  }
  size_t last_query = 0;
  bool has_query = false;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_query = i, has_query = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      out.markup("<|im_start|>user\n");
      out.content(trimmed(m.content));
      out.markup("<|im_end|>\n");
    } else if (m.role == "assistant") {
      const ShownReply reply = splitShownReply(m.content);
      if (!has_query || i > last_query) {
        out.markup("<|im_start|>assistant\n<think>\n");
        out.content(trimmed(reply.reasoning));
        out.markup("\n</think>\n\n");
      } else {
        out.markup("<|im_start|>assistant\n");
      }
      out.content(trimmed(reply.answer));
      out.markup("<|im_end|>\n");
    }
  }
  if (add_generation_prompt)
    out.markup(thinking ? "<|im_start|>assistant\n<think>\n"
                        : "<|im_start|>assistant\n<think>\n\n</think>\n\n");
  return out;
}

// Gemma 4 (google/gemma-4-*-it chat_template.jinja, as llama.cpp ships it in
// models/templates/gemma4.jinja): "<|turn>" + role + "\n" + trimmed content + "<turn|>\n"
// per message, the assistant's role written "model", a leading system message as the
// system turn; the generation prompt "<|turn>model\n" and, with enable_thinking off
// (the template's default, which moechat keeps), an empty thought channel
// "<|channel>thought\n<channel|>" so the model answers at once. Tools, images, the
// <|think|> switch and the template's stripping of a thought channel from earlier
// replies (moechat's replies carry none) are not templated.
ChatPrompt gemma4(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  for (const auto& m : messages) {
    if (m.role != "system" && m.role != "user" && m.role != "assistant") continue;
    out.markup("<|turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n");
    out.content(trimmed(m.content));
    out.markup("<turn|>\n");
  }
  if (add_generation_prompt) out.markup("<|turn>model\n<|channel>thought\n<channel|>");
  return out;
}

ChatPrompt harmony(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  ChatPrompt out;
  out.markup(
      "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
      "Knowledge cutoff: 2024-06\n\nReasoning: medium\n\n"
      "# Valid channels: analysis, commentary, final. Channel must be included for every message.<|end|>");
  bool instructions = false;  // a non-empty system prompt opened the developer message
  for (const auto& m : messages) {
    if (m.role != "system" || (!instructions && m.content.empty())) continue;
    out.markup(instructions ? "\n\n" : "<|start|>developer<|message|># Instructions\n\n");
    out.content(m.content);
    instructions = true;
  }
  if (instructions) out.markup("<|end|>");
  for (const auto& m : messages) {
    if (m.role == "user") {
      out.markup("<|start|>user<|message|>");
      out.content(m.content);
      out.markup("<|end|>");
    } else if (m.role == "assistant") {
      out.markup("<|start|>assistant<|channel|>final<|message|>");
      out.content(withoutThinking(m.content));
      out.markup("<|end|>");
    }
  }
  if (add_generation_prompt) out.markup("<|start|>assistant");
  return out;
}

// MiniMax-M2 (the chat_template.jinja of MiniMaxAI's M2 series, tools left out): the
// conversation opens with "]~!b[" (its BOS token) and one system turn, the first system
// message or, without one, a default (the template's names the model; ours does not);
// every turn is "]~b]" + role ("system", "user", "ai") + "\n" + content + "[e~[\n". An
// assistant turn after the last user message carries its reasoning as "<think>\n" +
// reasoning + "\n</think>\n\n" + answer, earlier ones only the answer (newlines around
// it stripped, as the template does). The generation prompt "]~b]ai\n<think>\n" opens
// the reasoning; with thinking off it closes an empty block, "<think>\n</think>\n\n"
// (the M2.7 template's enable_thinking=false). Several system messages are joined.
ChatPrompt minimax(const std::vector<ChatMessage>& messages, bool add_generation_prompt, bool thinking) {
  auto without_newlines = [](std::string_view s) {
    const size_t first = s.find_first_not_of('\n');
    if (first == std::string_view::npos) return std::string();
    return std::string(s.substr(first, s.find_last_not_of('\n') - first + 1));
  };
  ChatPrompt out;
  std::string system;
  bool has_system = false;
  for (const auto& m : messages) {
    if (m.role != "system" || m.content.empty()) continue;
    system += (has_system ? "\n\n" : "") + m.content;
    has_system = true;
  }
  out.markup("]~!b[]~b]system\n");
  out.content(has_system ? system : "You are a helpful assistant.");
  out.markup("[e~[\n");
  size_t last_query = 0;
  bool has_query = false;
  for (size_t i = 0; i < messages.size(); ++i)
    if (messages[i].role == "user") last_query = i, has_query = true;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (m.role == "user") {
      out.markup("]~b]user\n");
      out.content(m.content);
      out.markup("[e~[\n");
    } else if (m.role == "assistant") {
      const ShownReply reply = splitShownReply(m.content);
      out.markup("]~b]ai\n");
      const std::string reasoning = without_newlines(reply.reasoning);
      if ((!has_query || i > last_query) && !reasoning.empty()) {
        out.markup("<think>\n");
        out.content(reasoning);
        out.markup("\n</think>\n\n");
      }
      out.content(without_newlines(reply.answer));
      out.markup("[e~[\n");
    }
  }
  if (add_generation_prompt) out.markup(thinking ? "]~b]ai\n<think>\n" : "]~b]ai\n<think>\n</think>\n\n");
  return out;
}

bool contains(const std::string& s, std::string_view needle) { return s.find(needle) != std::string::npos; }

// The family a Jinja template text is written for, if its markers tell.
std::optional<ChatFamily> familyFromTemplate(const std::string& t) {
  if (contains(t, "]~b]")) return ChatFamily::MiniMax;
  if (contains(t, "[gMASK]")) return ChatFamily::Glm;
  if (contains(t, "<|turn>")) return ChatFamily::Gemma4;
  if (contains(t, "<|channel|>")) return ChatFamily::Harmony;
  if (contains(t, "<|im_start|>")) return ChatFamily::ChatML;
  if (contains(t, "[INST]")) return ChatFamily::Mixtral;
  if (contains(t, "<|user|>") && contains(t, "<|assistant|>")) return ChatFamily::Olmoe;
  if (contains(t, "User: ") && contains(t, "Assistant:")) return ChatFamily::DeepSeek;
  return std::nullopt;
}

ChatFamily familyFromArch(const std::string& arch) {
  if (arch == "llama") return ChatFamily::Mixtral;
  if (arch == "qwen35moe" || arch == "qwen35") return ChatFamily::Qwen35;
  if (arch == "deepseek" || arch == "deepseek2") return ChatFamily::DeepSeek;
  if (arch == "olmoe") return ChatFamily::Olmoe;
  if (arch == "glm4moe") return ChatFamily::Glm;
  if (arch == "gemma4") return ChatFamily::Gemma4;
  if (arch == "gpt-oss") return ChatFamily::Harmony;
  if (arch == "minimax-m2") return ChatFamily::MiniMax;
  return ChatFamily::ChatML;  // qwen2moe, qwen3moe and anything unknown
}

}  // namespace

bool chatHasThinkingSwitch(ChatFamily f) { return f == ChatFamily::Qwen35 || f == ChatFamily::MiniMax; }

const char* chatFamilyName(ChatFamily f) {
  switch (f) {
    case ChatFamily::Mixtral: return "mixtral";
    case ChatFamily::ChatML: return "chatml";
    case ChatFamily::DeepSeek: return "deepseek";
    case ChatFamily::Olmoe: return "olmoe";
    case ChatFamily::Glm: return "glm";
    case ChatFamily::Harmony: return "harmony";
    case ChatFamily::Qwen35: return "qwen35";
    case ChatFamily::MiniMax: return "minimax";
    case ChatFamily::Gemma4: return "gemma4";
  }
  return "unknown";
}

ChatFamily chatFamilyFor(const gguf::GgufFile& file) {
  const ChatFamily by_arch = familyFromArch(file.getString("general.architecture").value_or(""));
  if (auto tmpl = file.getString("tokenizer.chat_template"))
    if (auto family = familyFromTemplate(*tmpl)) {
      // Qwen3.5's template is ChatML with the reasoning block: the architecture tells.
      if (*family == ChatFamily::ChatML && by_arch == ChatFamily::Qwen35) return by_arch;
      return *family;
    }
  return by_arch;
}

void ChatPrompt::add(std::string text, bool is_markup) {
  if (text.empty()) return;
  if (!parts_.empty() && parts_.back().is_markup == is_markup)
    parts_.back().text += text;
  else
    parts_.push_back({std::move(text), is_markup});
}

std::string ChatPrompt::text() const {
  std::string out;
  for (const auto& p : parts_) out += p.text;
  return out;
}

std::vector<TextPiece> ChatPrompt::pieces() const {
  std::vector<TextPiece> out;
  out.reserve(parts_.size());
  for (const auto& p : parts_) out.push_back({p.text, p.is_markup});
  return out;
}

std::string applyChatTemplate(ChatFamily family, const std::vector<ChatMessage>& messages,
                              bool add_generation_prompt, const ChatOptions& options) {
  return chatPrompt(family, messages, add_generation_prompt, options).text();
}

std::vector<int32_t> encodeChat(const Tokenizer& tokenizer, ChatFamily family,
                                const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                const ChatOptions& options) {
  const ChatPrompt prompt = chatPrompt(family, messages, add_generation_prompt, options);
  return tokenizer.encodePieces(prompt.pieces(), tokenizer.addBosDefault());
}

ChatPrompt chatPrompt(ChatFamily family, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                      const ChatOptions& options) {
  switch (family) {
    case ChatFamily::Mixtral: return mixtral(messages);
    case ChatFamily::ChatML: return chatml(messages, add_generation_prompt);
    case ChatFamily::DeepSeek: return deepseek(messages, add_generation_prompt);
    case ChatFamily::Olmoe: return olmoe(messages, add_generation_prompt);
    case ChatFamily::Glm: return glm(messages, add_generation_prompt);
    case ChatFamily::Harmony: return harmony(messages, add_generation_prompt);
    case ChatFamily::Qwen35: return qwen35(messages, add_generation_prompt, options.thinking);
    case ChatFamily::MiniMax: return minimax(messages, add_generation_prompt, options.thinking);
    case ChatFamily::Gemma4: return gemma4(messages, add_generation_prompt);
  }
  return {};
}

std::vector<std::string> chatStopStrings(ChatFamily family) {
  switch (family) {
    case ChatFamily::Mixtral: return {"</s>", "[INST]"};
    case ChatFamily::ChatML: return {"<|im_end|>", "<|endoftext|>", "<|im_start|>"};
    case ChatFamily::DeepSeek: return {kDeepSeekEos, "\n\nUser:"};
    case ChatFamily::Olmoe: return {"<|endoftext|>", "<|user|>"};
    case ChatFamily::Glm: return {"<|user|>", "<|observation|>", "<|endoftext|>"};
    case ChatFamily::Harmony: return {"<|return|>", "<|call|>", "<|start|>user", "<|endoftext|>"};
    case ChatFamily::Qwen35: return {"<|im_end|>", "<|endoftext|>", "<|im_start|>"};
    case ChatFamily::MiniMax: return {"[e~[", "]~b]"};
    case ChatFamily::Gemma4: return {"<turn|>", "<|turn>"};
  }
  return {};
}

}  // namespace moe
