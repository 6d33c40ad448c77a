// The names of a download's states, as DownloadStatus::state and the download
// store's state column spell them, and the string conversions between the store
// (std::string) and Qt, shared by the download manager's source files.
#pragma once

#include <QString>
#include <string>

namespace moe::download_state {

inline const QString kQueued = QStringLiteral("queued");
inline const QString kRunning = QStringLiteral("running");
inline const QString kPaused = QStringLiteral("paused");
inline const QString kVerifying = QStringLiteral("verifying");
inline const QString kDone = QStringLiteral("done");
inline const QString kFailed = QStringLiteral("failed");

inline QString q(const std::string& s) { return QString::fromStdString(s); }
inline std::string s(const QString& q) { return q.toStdString(); }

}  // namespace moe::download_state
