// A predictor set trained for a demo model the way a user makes one: the CLI traces
// the built-in prompts (12 of them) and trains on the trace. `demo_flag`: "--demo"
// (the trained demo, which the app loads) or "--demo-random" (the random-weight one,
// which EngineLoadOptions{demo = true} loads).
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace moe::test {

// Writes the set to `preds` (its trace next to it). Returns an error, empty on success.
inline QString trainDemoPredictor(const QString& preds, const QString& demo_flag) {
  const QString trace = preds + ".moetrace";
  for (const QStringList& args : {QStringList{"trace", demo_flag, "-o", trace, "--limit", "12"},
                                  QStringList{"train", trace, "-o", preds}}) {
    QProcess cli;
    cli.start(MOECHAT_CLI, args);
    if (!cli.waitForFinished(120000) || cli.exitCode() != 0)
      return "moechat-cli " + args.join(' ') + " failed: " + QString::fromUtf8(cli.readAllStandardError());
  }
  return {};
}

}  // namespace moe::test
