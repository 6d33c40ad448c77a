// One moechat per data folder: a second instance on the same chats would mark the
// first one's streaming reply as interrupted and race it for the database's write
// lock. A lock file (QLockFile: held while the process lives, taken over when its
// owner died) says so at once, with the running instance's process id.
#pragma once

#include <QLockFile>
#include <QString>
#include <memory>

namespace moe {

struct InstanceLock {
  std::unique_ptr<QLockFile> lock;  // held while it lives; null when refused
  QString error;                    // why it was refused, fit for the user
};

// Takes "<data folder>/moechat.lock".
InstanceLock lockDataFolder(const QString& data_folder);

}  // namespace moe
