// shardscope: the desktop application. Options: --model SPEC --tp N --device cpu|cuda
// --dtype bf16|f16|f32 --threads N --session-file FILE (or the file as the only argument, as a file
// manager passes it), --engine HOST:PORT [--token-file F] (the model of a shardscope-engine server
// instead of one loaded here), and --screenshots DIR (drive the views, save PNGs, quit).
#include <QApplication>
#include <QCommandLineParser>
#include <QTimer>
#include <cstdio>

#include "core/error.h"
#include "ui/app_resources.h"
#include "ui/main_window.h"
#include "ui/screenshot_tour.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("ShardScope");
  QApplication::setApplicationName("ShardScope");
  QApplication::setApplicationVersion(SHARDSCOPE_VERSION);
  QApplication::setWindowIcon(shardscope::ui::appIcon());
  QGuiApplication::setDesktopFileName("shardscope");  // packaging/shardscope.desktop
  QCommandLineParser parser;
  parser.setApplicationDescription("Look inside tensor-parallel language models.");
  parser.addHelpOption();
  parser.addVersionOption();
  parser.addOptions({
      {"model", "Checkpoint folder, Hugging Face cache name or 'demo' (default).", "spec", "demo"},
      {"tp", "Tensor-parallel size (default 2).", "n", "2"},
      {"pp", "Pipeline-parallel size: stages of decoder layers (default 1).", "n", "1"},
      {"device", "cpu or cuda (default cpu).", "device", "cpu"},
      {"dtype", "bf16, f16 or f32 (default: f32 on cpu, the checkpoint's on cuda).", "dtype"},
      {"threads",
       "CPU threads per rank (default: 1 for a model of at most 64M parameters on the CPU, "
       "else cores / ranks).",
       "n", "0"},
      {"session-file", "Session file to record runs in (default: the last one).", "file"},
      {"engine", "Open the model of the shardscope-engine server at HOST:PORT instead.",
       "host:port"},
      {"token-file", "The engine server's access token (a file of mode 0600).", "file"},
      {"screenshots", "Drive the views, save a PNG of each into DIR, and quit.", "dir"},
  });
  parser.addPositionalArgument("session", "A session file to open (as --session-file).",
                               "[SESSION.shardscope]");
  parser.process(app);
  if (parser.positionalArguments().size() > 1) parser.showHelp(2);
  shardscope::ui::StartOptions options;
  options.model.model = parser.value("model").toStdString();
  options.model.tp = parser.value("tp").toInt();
  options.model.pp = parser.value("pp").toInt();
  try {
    options.model.device = shardscope::parseDeviceKind(parser.value("device").toStdString());
    options.model.dtype = shardscope::parseModelDtype(parser.value("dtype").toStdString());
  } catch (const shardscope::Error& e) {
    std::fprintf(stderr, "shardscope: %s\n", e.what());
    return 2;
  }
  options.model.threadsPerRank = parser.value("threads").toInt();
  options.sessionFile = parser.positionalArguments().isEmpty()
                            ? parser.value("session-file")
                            : parser.positionalArguments().first();
  options.engine = parser.value("engine");
  options.tokenFile = parser.value("token-file");
  options.restoreState = !parser.isSet("screenshots");
  if (options.model.tp < 1 || options.model.pp < 1 || options.model.threadsPerRank < 0)
    parser.showHelp(2);
  shardscope::ui::MainWindow window(options);
  window.show();
  if (!parser.isSet("screenshots")) return app.exec();
  shardscope::ui::ScreenshotTour tour(window, parser.value("screenshots"));
  QObject::connect(&tour, &shardscope::ui::ScreenshotTour::finished, &app,
                   [](int failures) { QApplication::exit(failures == 0 ? 0 : 1); });
  QTimer::singleShot(0, &tour, &shardscope::ui::ScreenshotTour::start);
  return app.exec();
}
