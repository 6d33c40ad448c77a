// The chat app below its window, as the desktop program and the tests assemble
// it: the conversations over an open database, the engine thread with its
// engine, and the chat controller between them. Built in that order and torn
// down in reverse: the controller first (a streaming reply is saved as stopped),
// then the engine thread (joined, so nothing writes afterwards), then the store.
#pragma once

#include <memory>

#include "app/core/app_database.h"
#include "app/core/chat_engine.h"
#include "app/core/conversation_store.h"
#include "app/qt/app_settings.h"
#include "app/qt/chat_controller.h"
#include "app/qt/inference_worker.h"

namespace moe {

class ChatApp {
 public:
  ChatApp(AppDatabase& db, AppSettings& settings, std::unique_ptr<ChatEngine> engine)
      : store_(db), engine_(std::move(engine)), chat_(store_, engine_, settings) {}
  ChatApp(const ChatApp&) = delete;
  ChatApp& operator=(const ChatApp&) = delete;

  ConversationStore& store() { return store_; }
  EngineHost& engine() { return engine_; }
  ChatController& chat() { return chat_; }

 private:
  ConversationStore store_;
  EngineHost engine_;
  ChatController chat_;
};

}  // namespace moe
