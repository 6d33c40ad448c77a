// The user's own conversations as a prompt source for predictor training
// (docs/predictor.md, "Predictor wizard"): the user's turns in live (not
// deleted) conversations, newest first. Qt-free.
#pragma once

#include <string>
#include <vector>

#include "app/core/app_database.h"

namespace moe {

// At most `limit` of the user's messages, newest first. Blank messages are
// left out, leading and trailing white space is cut, and a text that occurs
// more than once counts once (its newest occurrence): a repeated prompt could
// otherwise land in both the training and the test prompts and flatter the
// evaluation. limit <= 0 gives none.
std::vector<std::string> conversationPrompts(AppDatabase& db, int limit);

// How many prompts conversationPrompts could give at most (distinct, non-blank).
int conversationPromptCount(AppDatabase& db);

}  // namespace moe
