// The value a script saves when shardscope-cli runs it (the GUI suites compare their windows'
// results with it). The suite's target defines SHARDSCOPE_CLI, the path of the built CLI.
#pragma once

#include <QProcess>
#include <QStringList>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/store/session_store.h"

namespace shardscope::test {

// Runs `script` with `shardscope-cli run --log` (plus `extra` arguments) in `dir` and returns the
// saved value `name` of the run it logged; throws with the CLI's stderr when it fails.
inline trace::SavedValue cliSavedValue(const std::filesystem::path& dir, const std::string& script,
                                       const std::string& name, const QStringList& extra = {}) {
  const auto file = dir / "cli.py";
  std::ofstream(file) << script;
  const auto db = dir / "cli.db";
  QProcess p;
  p.start(SHARDSCOPE_CLI, QStringList{"run", QString::fromStdString(file.string())} + extra +
                              QStringList{"--log", QString::fromStdString(db.string())});
  if (!p.waitForFinished(300000) || p.exitCode() != 0)
    throw std::runtime_error("shardscope-cli failed: " + p.readAllStandardError().toStdString());
  store::SessionStore s(db, {.readOnly = true});
  return s.value(s.runs().back().id, name);
}

}  // namespace shardscope::test
