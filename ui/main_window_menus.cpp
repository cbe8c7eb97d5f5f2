// MainWindow's menus (File, Run, Help) and the actions that only they use.
#include <QDockWidget>
#include <QFileDialog>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>

#include "connect_engine_dialog.h"
#include "core/build_info.h"
#include "examples_menu.h"
#include "main_window.h"
#include "open_model_dialog.h"
#include "script_editor.h"

namespace shardscope::ui {

void MainWindow::buildMenus() {
  QMenu* file = menuBar()->addMenu(tr("&File"));
  file->addAction(tr("Open &model..."), QKeySequence::Open, this, [this] {
    OpenModelDialog dialog(modelOptions_, buildInfo().gpus, this);
    if (dialog.exec() == QDialog::Accepted) openModel(dialog.options());
  });
  QAction* connectEngine = file->addAction(tr("Co&nnect to engine..."), this, [this] {
    ConnectEngineDialog dialog(engineAddress_, engineTokenFile_, this);
    if (dialog.exec() == QDialog::Accepted)
      this->connectEngine(dialog.address(), dialog.tokenFile());
  });
  QAction* reconnect =
      file->addAction(tr("&Reconnect to engine"), this, &MainWindow::reconnectEngine);
  if (!EngineController::remoteEngines()) {
    connectEngine->setEnabled(false);
    connectEngine->setToolTip(tr("This ShardScope was built without gRPC."));
  }
  reconnect->setEnabled(false);  // until a model is open
  connect(controller_, &EngineController::modelLoaded, reconnect,
          [reconnect] { reconnect->setEnabled(true); });
  connect(controller_, &EngineController::loadFailed, reconnect,
          [reconnect] { reconnect->setEnabled(true); });
  file->addAction(tr("Open or new &session file..."), QKeySequence("Ctrl+Shift+O"), this, [this] {
    const QString path = QFileDialog::getSaveFileName(
        this, tr("Session file"), {}, tr("ShardScope sessions (*.db);;All files (*)"), nullptr,
        QFileDialog::DontConfirmOverwrite);
    if (path.isEmpty()) return;
    const QString error = openSession(path);
    if (!error.isEmpty()) QMessageBox::warning(this, tr("Session file"), error);
  });
  file->addAction(tr("&Export values..."), QKeySequence("Ctrl+E"), this, &MainWindow::exportValues);
  file->addAction(tr("Export &plot (PNG, SVG, PDF)..."), QKeySequence("Ctrl+Shift+E"), this,
                  &MainWindow::exportPlot);
  file->addAction(tr("&Copy plot"), QKeySequence("Ctrl+Shift+C"), this, &MainWindow::copyPlot);
  file->addSeparator();
  file->addMenu(examplesMenu(this, [this](const examples::Example& e) { loadExample(e); }));
  file->addSeparator();
  file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
  QMenu* run = menuBar()->addMenu(tr("&Run"));
  run->addAction(tr("&Generate"), QKeySequence("Ctrl+G"), this, &MainWindow::runGeneration);
  run->addAction(tr("&Read port"), QKeySequence("Ctrl+R"), this, &MainWindow::readSelectedPort);
  run->addAction(tr("&Zero heads"), QKeySequence("Ctrl+H"), this, &MainWindow::runAblation);
  run->addAction(tr("Run &script"), QKeySequence("Ctrl+Return"), this,
                 &MainWindow::runEditorScript);
  run->addAction(tr("&Logit lens"), QKeySequence("Ctrl+L"), this, &MainWindow::runLogitLens);
  run->addAction(tr("&Top-k"), QKeySequence("Ctrl+K"), this, &MainWindow::runTopK);
  run->addAction(tr("S&top"), QKeySequence(Qt::Key_Escape), this, &MainWindow::stop);
  QMenu* help = menuBar()->addMenu(tr("&Help"));
  help->addAction(tr("&About ShardScope"), this, &MainWindow::about);
}

QDockWidget* MainWindow::addDock(const QString& title, const char* name, QWidget* widget,
                                 Qt::DockWidgetArea area) {
  auto* dock = new QDockWidget(title, this);
  dock->setObjectName(name);
  dock->setWidget(widget);
  addDockWidget(area, dock);
  return dock;
}

void MainWindow::about() {
  const BuildInfo b = buildInfo();
  QMessageBox::about(
      this, tr("About ShardScope"),
      tr("<b>ShardScope %1</b><br>Looking inside tensor-parallel language models.<br><br>"
         "Qt %2<br>LibTorch %3<br>CUDA: %4<br>NCCL: %5")
          .arg(QString::fromStdString(b.shardscope))
          .arg(qVersion())
          .arg(QString::fromStdString(b.libtorch))
          .arg(b.cuda ? tr("yes, %1 GPU(s)").arg(b.gpus) : tr("no"))
          .arg(b.nccl ? QString::fromStdString(b.ncclVersion) : tr("not built")));
}

void MainWindow::loadExample(const examples::Example& example) {
  editor_->setPlainText(QString::fromStdString(example.source));
  editor_->markError(0, 0);
  errorLabel_->clear();
  if (auto* dock = findChild<QDockWidget*>("script")) dock->raise();
  status_->setText(tr("Example '%1' is in the script editor (model: %2). Press Run script.")
                       .arg(QString::fromStdString(example.title))
                       .arg(QString::fromStdString(example.model)));
}

}  // namespace shardscope::ui
